"""``head_dim`` as its own scenario field: heads·head_dim ≠ d_model through every layer of mhabench.

The small shape d_model 64, 4 heads with head_dim 32 (a query width of 128, wider than the model) and 8
(narrower), with and without grouped K/V heads, is run through the weights, every core implementation,
the float64 reference, the cost model and the counted ops, decode, train, the memory guard, the
tensor-parallel split and the probe.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import TINY_TIMING
from plain_cases import plain_case

from mhabench import cost
from mhabench.analysis.advice.cases import cases_of, swept
from mhabench.analysis.case_label import case_label
from mhabench.errors import ConfigError, UnsupportedError
from mhabench.impls import build, get_spec
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.reference import decode_reference, numerical_error, reference_attention, reference_bytes
from mhabench.impls.tensor_parallel import TensorParallelFused, TensorParallelNaive, TPGroup
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.peaks import DevicePeaks
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.probe.config import expand, parse_probe_config
from mhabench.probe.inputs import random_source
from mhabench.results.columns import CASE_KEY, with_key_defaults
from mhabench.run import runner
from mhabench.run.case import screen
from mhabench.scenario.cases import Case, expand_cases
from mhabench.scenario.loading import parse_config

D_MODEL, HEADS = 64, 4
CPU = torch.device("cpu")


def weights_for(head_dim: int, kv_heads: int = HEADS, bias: bool = True, seed: int = 0) -> AttentionWeights:
    return AttentionWeights.random(D_MODEL, bias, seed, kv_dim=kv_heads * head_dim, q_dim=HEADS * head_dim)


def config(**scenario: Any) -> Any:
    base = {"name": "hd", "seq_len": 12, "d_model": D_MODEL, "heads": HEADS}
    data = {"device": "cpu", "threads": 1, "timing": dict(TINY_TIMING), "scenarios": [base | scenario]}
    return parse_config(data, "hd.yaml")


# --- the field --------------------------------------------------------------------------------------


def test_head_dim_defaults_to_d_model_over_heads_and_keeps_old_case_ids() -> None:
    (case,) = expand_cases(config(), CPU)
    assert case.head_dim == 16 and not case.own_head_dim
    assert case.case_id == "hd/b1-n12-d64-h4-float32"
    (same,) = expand_cases(config(head_dim=16), CPU)  # given, but equal to the default: the same case
    assert same.case_id == case.case_id


def test_head_dim_sweeps_and_names_itself_in_the_case_id() -> None:
    cases = expand_cases(config(head_dim=[32, 8], kv_heads=[4, 2]), CPU)
    assert [c.case_id for c in cases] == [
        "hd/b1-n12-d64-h4-hd32-float32",
        "hd/b1-n12-d64-h4-hd8-float32",
        "hd/b1-n12-d64-h4-hd32-kv2-float32",
        "hd/b1-n12-d64-h4-hd8-kv2-float32",
    ]
    assert {c.head_dim for c in cases} == {32, 8}


def test_with_head_dim_d_model_need_not_divide_by_heads() -> None:
    """Gemma 2 2B: d_model 2304, 8 heads of 256; without head_dim the same shape is refused."""
    (case,) = expand_cases(config(d_model=2304, heads=8, head_dim=256, kv_heads=4), CPU)
    assert case.own_head_dim and case.heads * case.head_dim == 2048
    with pytest.raises(ConfigError, match=r"scenarios\[0\]\.heads: d_model 100 is not divisible by heads 3"):
        config(d_model=100, heads=3)
    config(d_model=100, heads=3, head_dim=32)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, r"scenarios\[0\]\.head_dim: Input should be greater than 0"),
        ("32", r"scenarios\[0\]\.head_dim.*valid integer"),
        ([], r"scenarios\[0\]\.head_dim: an empty list sweeps nothing"),
        (100_000, r"scenarios\[0\]\.head_dim: Input should be less than or equal to 16384"),
    ],
)
def test_bad_head_dim_is_one_line_naming_the_field(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        config(head_dim=value)
    assert "\n" not in str(caught.value)


def test_head_dim_is_a_key_column() -> None:
    """Two cases that differ only in head_dim are different measurements: compare must not match them."""
    assert "head_dim" in CASE_KEY


# --- weights, implementations, reference ---------------------------------------------------------------


def test_weights_have_the_query_width_apart_from_d_model() -> None:
    w = weights_for(32, kv_heads=2)
    assert (w.w_q.shape, w.w_k.shape, w.w_v.shape, w.w_o.shape) == ((64, 128), (64, 64), (64, 64), (128, 64))
    assert (w.b_q.shape, w.b_k.shape, w.b_o.shape) == ((128,), (64,), (64,))
    assert (w.d_model, w.q_dim, w.kv_dim) == (64, 128, 64)
    default = AttentionWeights.random(D_MODEL, seed=3)
    assert torch.equal(default.w_q, AttentionWeights.random(D_MODEL, seed=3, q_dim=D_MODEL).w_q)


@pytest.mark.parametrize("name", ["naive", "per_head", "fused", "sdpa_math", "unscaled", "additive", "compiled"])
@pytest.mark.parametrize(("head_dim", "kv_heads"), [(32, 4), (8, 4), (32, 2), (8, 1)])
def test_implementations_honour_head_dim(name: str, head_dim: int, kv_heads: int) -> None:
    """Each output equals its float64 reference, and not the reference of d_model / heads wide heads: the
    1/√d_k scale is the head's own (a wrong scale, or a wrong split of the heads, fails)."""
    weights = weights_for(head_dim, kv_heads)
    x = torch.randn(2, 7, D_MODEL, generator=torch.Generator().manual_seed(5))
    spec = get_spec(name)
    reference = spec.reference or reference_attention
    with torch.no_grad():
        try:
            out = build(name, weights, HEADS, CAUSAL)(x)
        except UnsupportedError as exc:  # a platform without a compiler is compiled's own unsupported row
            pytest.skip(f"{name}: {exc}")
    assert numerical_error(out, reference(weights, x, HEADS, CAUSAL))[1] < 1e-5
    wrong_scale = reference_attention(weights, x, HEADS, CAUSAL, scale=1 / math.sqrt(D_MODEL // HEADS))
    if name != "unscaled":
        assert numerical_error(out, wrong_scale)[1] > 1e-3


@pytest.mark.parametrize("name", ["shared_qk"])
def test_shared_qk_honours_head_dim(name: str) -> None:
    weights = weights_for(8)
    x = torch.randn(1, 5, D_MODEL)
    with torch.no_grad():
        out = build(name, weights, HEADS)(x)
    assert numerical_error(out, get_spec(name).reference(weights, x, HEADS, PLAIN))[1] < 1e-5


@pytest.mark.parametrize(("name", "reason"), [("torch_mha", "4 × 32 ≠ 64"), ("full_dim_heads", "4 × 32 ≠ 64")])
def test_layouts_that_cannot_set_head_dim_apart_are_unsupported(name: str, reason: str) -> None:
    (case,) = expand_cases(config(head_dim=32), CPU)
    outcome = screen(get_spec(name), case, CPU, guard=False)
    assert outcome is not None and outcome.status == "unsupported"
    assert outcome.error == f"{name}: no head_dim apart from d_model / heads ({reason})"
    (plain,) = expand_cases(config(), CPU)
    assert screen(get_spec(name), plain, CPU, guard=False) is None


def test_flash_attn_above_256_is_unsupported_with_the_reason() -> None:
    capabilities = get_spec("flash_attn").capabilities
    wide_case = plain_case("m", 1, 8, 3584, 16, kv_heads=8, head_dim=512)
    wide = capabilities.unsupported_reason("flash_attn", wide_case.workload(), dtype="bfloat16", device_type="cuda")
    if wide != "flash_attn: flash_attn not installed":  # a missing package is named first
        assert wide == "flash_attn: head_dim 512 > 256 has no kernel"
        assert (
            capabilities.unsupported_reason(
                "flash_attn",
                dataclasses.replace(wide_case, head_dim=256).workload(),
                dtype="bfloat16",
                device_type="cuda",
            )
            is None
        )


# --- the runner, end to end ---------------------------------------------------------------------------


def test_core_rows_check_against_the_reference_at_head_dim_apart(tmp_path: Path, fixed_peaks: DevicePeaks) -> None:
    """Every core implementation through the runner: ok and within tolerance, or unsupported with the reason;
    the row records head_dim and its counted FLOPs match the cost model's."""
    result = runner.run(config(head_dim=[32, 8], kv_heads=[4, 2], causal=True, bias=True), tmp_path)
    rows = pd.read_csv(result.run_dir / "results.csv")
    ok = rows[rows["status"] == "ok"]
    assert set(ok["impl"]) == {"naive", "per_head", "fused"}
    assert (ok["max_rel_err"] < 1e-5).all()
    assert (ok["measured_flops"] == ok["flops"]).all()
    assert sorted(set(rows["head_dim"])) == [8, 32]
    refused = rows[rows["impl"] == "torch_mha"]
    assert (refused["status"] == "unsupported").all()


# --- the cost model, the reference's memory and the guard ---------------------------------------------


def test_cost_model_prices_the_query_width() -> None:
    """Q and O projections are 2·b·n·D·q_dim each, attention 4·b·h·n·L·d_k, whatever the head width."""
    b, n, h, kv = 2, 10, HEADS, 2
    for head_dim in (32, 8):
        w = cost.Workload(b, n, n, D_MODEL, h, kv, head_dim, 4)
        q_dim, kv_dim = h * head_dim, kv * head_dim
        assert (w.q_dim, w.kv_dim) == (q_dim, kv_dim)
        fused = cost.FUSED(w)
        assert fused.proj_flops == 2 * b * n * D_MODEL * (2 * q_dim + 2 * kv_dim)
        assert fused.attn_flops == 4 * b * h * n * n * head_dim
        assert cost.FUSED(cost.Workload(b, n, n, D_MODEL, h, kv, head_dim, 4, train=True)).flops > (fused.flops)


def test_memory_guard_and_reference_bytes_grow_with_the_query_width() -> None:
    def case(head_dim: int | None) -> Case:
        return plain_case("m", 1, 4096, 4096, 16, True, False, "bfloat16", 0, kv_heads=8, head_dim=head_dim)

    narrow, wide = case(None), case(512)  # 16 heads of 256 (= D / h) against 16 of 512
    assert reference_bytes(wide.workload()) > reference_bytes(narrow.workload())
    assert get_spec("fused").cost(wide.workload()).predicted_peak_bytes > (
        get_spec("fused").cost(narrow.workload()).predicted_peak_bytes
    )


# --- decode and train -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["naive", "per_head", "fused"])
@pytest.mark.parametrize(("head_dim", "kv_heads"), [(32, 2), (8, 4)])
def test_decode_honours_head_dim(name: str, head_dim: int, kv_heads: int) -> None:
    weights = weights_for(head_dim, kv_heads, seed=1)
    x = torch.randn(2, 9, D_MODEL, generator=torch.Generator().manual_seed(2))
    module = build(name, weights, HEADS)
    with torch.no_grad():
        cache = KVCache.prefill(*module.project_kv(x[:, :-1]))
        out = module.decode_step(x[:, -1:], cache)
    assert numerical_error(out, decode_reference(weights, x, HEADS, PLAIN))[1] < 1e-5
    assert cache.nbytes == 2 * 2 * kv_heads * 9 * head_dim * 4  # 8 cached tokens and the new one, head_dim wide


def test_train_gradients_follow_the_float64_reference_at_head_dim_apart() -> None:
    weights = weights_for(32, kv_heads=2, seed=3)
    x, grad_out = torch.randn(2, 6, D_MODEL), torch.randn(2, 6, D_MODEL)
    x64 = x.double().requires_grad_()
    reference_attention(weights, x64, HEADS, CAUSAL).backward(grad_out.double())
    for name in ("naive", "per_head", "fused"):
        leaf = x.clone().requires_grad_()
        build(name, weights, HEADS, CAUSAL)(leaf).backward(grad_out)
        assert numerical_error(leaf.grad, x64.grad)[1] < 1e-5, name


def test_a_train_case_runs_with_head_dim_apart(tmp_path: Path, fixed_peaks: DevicePeaks) -> None:
    result = runner.run(config(head_dim=8, kv_heads=2, mode="train"), tmp_path)
    rows = pd.read_csv(result.run_dir / "results.csv").set_index("impl")
    assert rows.loc[["naive", "per_head", "fused"], "status"].eq("ok").all()
    assert rows.loc["fused", "backward_flops"] > 0


# --- tensor parallel and the probe ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", [TensorParallelFused, TensorParallelNaive])
@pytest.mark.parametrize(("head_dim", "kv_heads"), [(32, 4), (8, 2)])
def test_tensor_parallel_partials_sum_to_the_layer_at_head_dim_apart(
    variant: Any, head_dim: int, kv_heads: int
) -> None:
    weights = weights_for(head_dim, kv_heads)
    x = torch.randn(1, 6, D_MODEL)
    with torch.no_grad():
        partials = [variant(weights, HEADS, CAUSAL, tp=TPGroup(2, rank)) for rank in range(2)]
        total = sum(layer(x) - weights.b_o for layer in partials) + weights.b_o
    assert numerical_error(total, reference_attention(weights, x, HEADS, CAUSAL))[1] < 1e-5


def test_probe_cases_carry_head_dim_into_their_weights() -> None:
    data = {"scenarios": [{"seq_len": 8, "d_model": 32, "heads": 4, "head_dim": [16, 8], "claims": ["var_qk"]}]}
    (spec,) = parse_probe_config(data, "p.yaml").scenarios
    wide, narrow = expand(spec)
    assert (wide.head_dim, narrow.head_dim) == (16, 8)
    assert wide.case_id.endswith("-h4-hd16") and "-hd" not in narrow.case_id
    assert random_source(wide).weights[0].w_q.shape == (32, 64)


# --- reading runs back, labels and advice --------------------------------------------------------------


def test_a_run_without_head_dim_or_model_reads_with_them_filled_in() -> None:
    old = pd.DataFrame({"d_model": [512, 512], "heads": [8, 4], "causal": [False, True]})
    frame = with_key_defaults(old)
    assert list(frame["head_dim"]) == [64, 128] and list(frame["model"]) == [None, None]


def test_the_case_label_names_a_head_dim_set_apart_only() -> None:
    row = {"seq_len": 8, "heads": 4, "d_model": 64, "batch": 1, "dtype": "float32", "causal": False, "bias": False}
    assert case_label(row | {"head_dim": 16}) == "n=8 h=4 d=64 b=1 float32"
    assert case_label(row | {"head_dim": 32.0}) == "n=8 h=4 d=64 b=1 float32 d_k=32"


def test_advice_sweeps_head_dim_only_where_it_is_set_apart() -> None:
    def frame(points: list[tuple[int, int]]) -> pd.DataFrame:
        fields = {"batch": 1, "seq_len": 8, "d_model": 64, "causal": False, "bias": False, "mode": "forward"}
        rows = [
            fields | {"case_id": f"c{i}", "scenario": "s", "impl": "fused", "heads": h, "head_dim": d, "dtype": "f"}
            for i, (h, d) in enumerate(points)
        ]
        return pd.DataFrame(rows).assign(kv_heads=lambda f: f["heads"])

    assert "head_dim" not in swept(cases_of("r", frame([(4, 16), (8, 8)])))  # it follows heads
    assert "head_dim" in swept(cases_of("r", frame([(4, 16), (4, 32)])))
