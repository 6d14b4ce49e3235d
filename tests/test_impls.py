"""Every core implementation against the float64 reference, against each other, and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import CORE_IMPLEMENTATIONS, TINY_TIMING
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_cases import plain_case
from torch import nn

from mhabench import AttentionWeights, available_implementations, build, register
from mhabench.errors import ConfigError, ReasonCode, RegistryError, UnknownImplementationError
from mhabench.impls import core_implementations, get_spec
from mhabench.impls.reference import TOLERANCE, numerical_error, reference_attention
from mhabench.pattern import CAUSAL, PLAIN

CORE = [name for name in available_implementations() if name in CORE_IMPLEMENTATIONS]
FP32_TOL = TOLERANCE["float32"]

# (batch, seq_len, d_model, heads, bias, causal)
SHAPES = [
    (1, 8, 16, 1, False, False),  # one head
    (2, 7, 16, 16, True, True),  # heads = d_model (head_dim 1), odd seq_len, batch > 1
    (3, 13, 24, 3, True, False),  # odd seq_len, bias
    (1, 1, 8, 2, False, True),  # a single causal token
    (2, 5, 32, 4, False, True),
    (2, 16, 64, 8, True, True),
]


def inputs(batch: int, seq_len: int, d_model: int, bias: bool, seed: int = 0, kv_dim: int | None = None):
    weights = AttentionWeights.random(d_model, bias=bias, seed=seed, kv_dim=kv_dim)
    x = torch.randn(batch, seq_len, d_model, generator=torch.Generator().manual_seed(seed + 1))
    return weights, x


def forward(name: str, weights: AttentionWeights, x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    with torch.no_grad():
        return build(name, weights, heads, CAUSAL if causal else PLAIN)(x)


def test_core_set_is_registered_in_order() -> None:
    assert list(CORE_IMPLEMENTATIONS) == CORE
    assert core_implementations()[:4] == list(CORE_IMPLEMENTATIONS)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}-n{}-d{}-h{}-bias{}-causal{}".format(*s))
@pytest.mark.parametrize("name", CORE)
def test_matches_float64_reference(name: str, shape: tuple[int, int, int, int, bool, bool]) -> None:
    batch, seq_len, d_model, heads, bias, causal = shape
    weights, x = inputs(batch, seq_len, d_model, bias)
    module = build(name, weights, heads, CAUSAL if causal else PLAIN)
    assert isinstance(module, nn.Module)
    with torch.no_grad():
        out = module(x)
    assert out.shape == x.shape
    assert out.dtype == x.dtype
    _, rel = numerical_error(out, reference_attention(weights, x, heads, CAUSAL if causal else PLAIN))
    assert rel < FP32_TOL


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}-n{}-d{}-h{}-bias{}-causal{}".format(*s))
@pytest.mark.parametrize("name", [n for n in CORE if n != "naive"])
def test_equals_naive_within_fp32_tolerance(name: str, shape: tuple[int, int, int, int, bool, bool]) -> None:
    batch, seq_len, d_model, heads, bias, causal = shape
    weights, x = inputs(batch, seq_len, d_model, bias, seed=7)
    expected = forward("naive", weights, x, heads, causal)
    torch.testing.assert_close(forward(name, weights, x, heads, causal), expected, rtol=1e-4, atol=1e-5)


@settings(max_examples=10, deadline=None)
@given(
    batch=st.integers(1, 3),
    seq_len=st.integers(1, 12),
    head_dim=st.integers(1, 8),
    heads=st.integers(1, 4),
    bias=st.booleans(),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_shapes_match_reference(
    batch: int, seq_len: int, head_dim: int, heads: int, bias: bool, causal: bool, seed: int
) -> None:
    weights, x = inputs(batch, seq_len, heads * head_dim, bias, seed=seed)
    reference = reference_attention(weights, x, heads, CAUSAL if causal else PLAIN)
    for name in CORE:
        _, rel = numerical_error(forward(name, weights, x, heads, causal), reference)
        assert rel < FP32_TOL, name


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", ["naive", "per_head", "fused"])
def test_grouped_query_weights_match_reference(name: str, causal: bool, kv_heads: int) -> None:
    d_model, heads = 32, 4
    weights, x = inputs(2, 9, d_model, bias=True, kv_dim=kv_heads * d_model // heads)
    assert weights.kv_dim < d_model
    _, rel = numerical_error(
        forward(name, weights, x, heads, causal), reference_attention(weights, x, heads, CAUSAL if causal else PLAIN)
    )
    assert rel < FP32_TOL


@pytest.mark.parametrize(
    ("name", "grouped"), [("naive", True), ("per_head", True), ("fused", True), ("torch_mha", False)]
)
def test_grouped_query_support_is_a_registry_capability(name: str, grouped: bool) -> None:
    """nn.MultiheadAttention has no grouped K/V heads: the capability says so, and the reason names the shape."""
    capabilities = get_spec(name).capabilities
    assert capabilities.grouped_kv is grouped
    grouped_case = plain_case("t", 1, 8, 64, 4, kv_heads=2)
    reason = capabilities.unsupported_reason(name, grouped_case.workload(), dtype="float32", device_type="cpu")
    assert reason == (None if grouped else f"{name}: no grouped K/V heads (kv_heads 2 < heads 4)")
    assert grouped or reason.code is ReasonCode.GROUPED_KV  # what checks match; the text is for people
    same = capabilities.unsupported_reason(
        name, plain_case("t", 1, 8, 64, 4).workload(), dtype="float32", device_type="cpu"
    )
    assert same is None


def test_reference_agrees_with_torch_sdpa_in_float64() -> None:
    """The reference is independent code; check it once against torch's own attention math."""
    batch, seq_len, d_model, heads = 2, 6, 12, 3
    weights, x = inputs(batch, seq_len, d_model, bias=True)
    w = weights.to(dtype=torch.float64)
    x64 = x.double()

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, seq_len, heads, -1).transpose(1, 2)

    q, k, v = (split(x64 @ m + b) for m, b in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v)))
    attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, seq_len, d_model)
    torch.testing.assert_close(reference_attention(weights, x, heads, CAUSAL), attn @ w.w_o + w.b_o)


def test_tolerance_catches_a_wrong_mask() -> None:
    """The fp32 tolerance is far below the error of a real bug (here: a missing causal mask)."""
    weights, x = inputs(1, 8, 16, bias=False)
    _, rel = numerical_error(forward("fused", weights, x, 2, causal=False), reference_attention(weights, x, 2, CAUSAL))
    assert rel > 100 * FP32_TOL


def test_numerical_error_is_absolute_and_relative_to_max_reference() -> None:
    reference = torch.tensor([[2.0, -4.0]], dtype=torch.float64)
    abs_err, rel_err = numerical_error(torch.tensor([[2.5, -4.0]]), reference)
    assert abs_err == pytest.approx(0.5)
    assert rel_err == pytest.approx(0.125)


def test_weights_are_reproducible_and_shaped() -> None:
    a = AttentionWeights.random(16, bias=True, seed=5, kv_dim=8)
    b = AttentionWeights.random(16, bias=True, seed=5, kv_dim=8)
    assert all(torch.equal(s, t) for s, t in zip(a.tensors(), b.tensors(), strict=True))
    assert (a.w_q.shape, a.w_k.shape, a.w_v.shape, a.w_o.shape) == ((16, 16), (16, 8), (16, 8), (16, 16))
    assert (a.b_q.shape, a.b_k.shape, a.b_o.shape) == ((16,), (8,), (16,))
    assert a.parameter_count() == 2 * 16 * 16 + 2 * 16 * 8 + 2 * 16 + 2 * 8
    plain = AttentionWeights.random(16)
    assert not plain.has_bias and plain.b_o is None
    assert not torch.equal(plain.w_q, AttentionWeights.random(16, seed=1).w_q)


def test_heads_must_divide_the_query_width_at_build() -> None:
    weights, _ = inputs(1, 4, 12, bias=False)
    with pytest.raises(ConfigError, match="query width 12 is not divisible by heads 5"):
        build("naive", weights, 5)


def test_duplicate_registration_is_an_error_and_changes_nothing() -> None:
    before, names = get_spec("naive"), available_implementations()
    with pytest.raises(RegistryError, match="'naive' is already registered"):
        register("naive", description="impostor")(lambda weights, heads, causal: nn.Identity())
    assert get_spec("naive") is before
    assert available_implementations() == names  # nothing added, nothing reordered


def test_unknown_name_lists_known_ones() -> None:
    weights, _ = inputs(1, 4, 8, bias=False)
    with pytest.raises(UnknownImplementationError, match="unknown implementation 'nope'") as caught:
        build("nope", weights, 2)
    for name in available_implementations():
        assert name in str(caught.value)


def test_specs_describe_each_core_implementation() -> None:
    models = {name: get_spec(name).cost.name for name in CORE}
    assert models == {"naive": "materialized", "per_head": "per_head", "fused": "fused", "torch_mha": "fused"}
    assert all(get_spec(name).description and get_spec(name).core for name in CORE)


def test_per_head_holds_contiguous_per_head_matrices() -> None:
    """The "3h small matrices" layout: h separate (d_model, d_k) copies for each of Q, K and V."""
    weights, _ = inputs(1, 4, 16, bias=False)
    module = build("per_head", weights, 4)
    blocks = [w for heads in (module.q_heads, module.k_heads, module.v_heads) for w, _ in heads.blocks()]
    assert len(blocks) == 12
    assert all(w.shape == (16, 4) and w.is_contiguous() for w in blocks)
    assert torch.equal(torch.cat([w for w, _ in module.q_heads.blocks()], dim=1), weights.w_q)
    assert weights.w_q.data_ptr() not in {w.data_ptr() for w in blocks}  # copies, not views of W_Q


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("name", CORE)
def test_weights_are_the_modules_frozen_parameters(name: str, bias: bool) -> None:
    """Every weight is a registered, frozen nn.Parameter: parameters() is the weight set, state_dict() has it."""
    weights, _ = inputs(1, 4, 16, bias=bias)
    module = build(name, weights, 4)
    parameters = list(module.parameters())
    assert parameters and all(isinstance(p, nn.Parameter) and not p.requires_grad for p in parameters)
    assert sum(p.numel() for p in parameters) == weights.parameter_count()
    assert len(module.state_dict()) == len(parameters)
    assert len(parameters) == len({id(p) for p in parameters})


def test_consecutive_cases_share_one_weight_set_with_the_same_numbers() -> None:
    """Drawing d_model = 4096 weights takes seconds of host time: a case reuses the previous case's set."""
    from mhabench.run.inputs import make_inputs
    from mhabench.scenario.cases import expand_cases
    from mhabench.scenario.loading import parse_config

    cpu = torch.device("cpu")
    config = parse_config({"scenarios": [{"seed": 7, "seq_len": [8, 16], "d_model": 32, "heads": 4}]}, "x.yaml")
    first, second = expand_cases(config, cpu)
    other = parse_config({"scenarios": [{"seed": 8, "seq_len": 8, "d_model": 32, "heads": 4}]}, "x.yaml")
    other_seed = expand_cases(other, cpu)[0]
    shared = make_inputs(first, cpu).weights
    assert make_inputs(second, cpu).weights is shared
    assert torch.equal(shared.w_q, AttentionWeights.random(32, seed=7).w_q)
    assert not torch.equal(make_inputs(other_seed, cpu).weights.w_q, shared.w_q)


def test_no_implementation_writes_to_the_weights_the_next_case_reuses(tmp_path: Path, fixed_peaks: object) -> None:
    """Forward, train and decode cases of every eager CPU implementation leave the shared set as drawn."""
    from mhabench.run import runner
    from mhabench.run.inputs import case_weights
    from mhabench.scenario.loading import parse_config

    names = [n for n in available_implementations() if "cpu" in get_spec(n).capabilities.devices]
    names = [n for n in names if not get_spec(n).compiles and not get_spec(n).capabilities.requires]
    shape = {"seq_len": 8, "d_model": 32, "heads": 4, "bias": True, "seed": 3}
    modes = [{"name": "fwd"}, {"name": "train", "mode": "train"}, {"name": "dec", "phase": "decode"}]
    scenarios = [{**mode, **shape} for mode in modes]
    config = parse_config({"implementations": names, "timing": TINY_TIMING, "scenarios": scenarios}, "x.yaml")
    result = runner.run(config, tmp_path)
    assert result is not None and {row.outcome.status for row in result.rows} <= {"ok", "unsupported"}
    hits = case_weights.cache_info().hits
    reused = case_weights(32, True, 3, torch.float32, torch.device("cpu"), 32, 32)
    assert case_weights.cache_info().hits == hits + 1  # the set the last case ran with
    fresh = AttentionWeights.random(32, True, 3)
    assert all(torch.equal(a, b) for a, b in zip(reused.tensors(), fresh.tensors(), strict=True))
