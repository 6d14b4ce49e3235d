"""The cost model: FLOPs against torch's FlopCounterMode, formula spot checks, the bytes models."""

from __future__ import annotations

import contextlib

import pytest
import torch
from conftest import CORE_IMPLEMENTATIONS
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from mhabench import AttentionWeights, build
from mhabench import cost as cost_model
from mhabench.cost import SOFTMAX_FLOPS_PER_SCORE, Workload, gemm_bytes
from mhabench.impls import get_spec
from mhabench.pattern import CAUSAL, PLAIN

SDPA_USERS = {"fused", "torch_mha"}


def workload(b: int, n: int, d: int, h: int, causal: bool = False, kv_heads: int | None = None, e: int = 4) -> Workload:
    return Workload(b, n, n, d, h, h if kv_heads is None else kv_heads, d // h, e, CAUSAL if causal else PLAIN)


def counted_flops(name: str, w: Workload, bias: bool, math_sdpa: bool) -> int:
    """FlopCounterMode's total for one forward call.

    torch_mha's (frozen) parameters require grad here, with grad mode on: otherwise, with a bias,
    nn.MultiheadAttention takes its inference fast path, one opaque ``_native_multi_head_attention``
    op that FlopCounterMode counts as 0 FLOPs.
    """
    weights = AttentionWeights.random(w.d_model, bias=bias, kv_dim=w.kv_dim)
    module = build(name, weights, w.heads, w.pattern).requires_grad_(name == "torch_mha")
    x = torch.randn(w.batch, w.seq_len, w.d_model)
    counter = FlopCounterMode(display=False)
    backend = sdpa_kernel(SDPBackend.MATH) if math_sdpa else contextlib.nullcontext()
    with torch.set_grad_enabled(name == "torch_mha"), backend, counter:
        module(x)
    return counter.get_total_flops()


@pytest.mark.parametrize(("bias", "causal"), [(False, False), (True, True)])
@pytest.mark.parametrize("name", CORE_IMPLEMENTATIONS)
def test_flops_equal_flop_counter(name: str, bias: bool, causal: bool) -> None:
    """Cross-check: fused and torch_mha run under the math SDPA backend, which FlopCounterMode counts."""
    w = workload(2, 12, 32, 4, causal)
    cost = get_spec(name).cost(w)
    assert counted_flops(name, w, bias, math_sdpa=name in SDPA_USERS) == cost.flops


@pytest.mark.parametrize("name", ["naive", "per_head", "fused"])
def test_grouped_query_flops_equal_flop_counter(name: str) -> None:
    w = workload(2, 12, 32, 4, causal=True, kv_heads=2)
    cost = get_spec(name).cost(w)
    assert counted_flops(name, w, bias=True, math_sdpa=True) == cost.flops
    assert cost.proj_flops == 2 * w.tokens * w.d_model * (2 * w.d_model + 2 * w.kv_dim)


@pytest.mark.parametrize("name", sorted(SDPA_USERS))
def test_flop_counter_misses_the_cpu_flash_kernel(name: str) -> None:
    """Documents torch 2.13 on the CPU: FlopCounterMode has no formula for the CPU flash SDPA op,
    so the default path counts the projections only. If this starts failing, torch now counts it
    and the math-backend workaround above is no longer needed."""
    w = workload(1, 16, 32, 4)
    assert counted_flops(name, w, bias=False, math_sdpa=False) == cost_model.FUSED(w).proj_flops


def test_flops_formula_spot_check() -> None:
    b, n, d, h = 2, 64, 128, 4
    cost = cost_model.FUSED(workload(b, n, d, h))
    assert cost.proj_flops == 8 * b * n * d**2
    assert cost.attn_flops == 4 * b * n**2 * d
    assert cost.flops == 8 * b * n * d**2 + 4 * b * n**2 * d
    assert cost.softmax_flops == SOFTMAX_FLOPS_PER_SCORE * b * h * n * n
    assert cost.useful_flops == cost.flops


@pytest.mark.parametrize("model", [cost_model.MATERIALIZED, cost_model.PER_HEAD, cost_model.FUSED])
def test_flops_do_not_depend_on_layout_or_dtype(model: cost_model.CostModel) -> None:
    reference = cost_model.FUSED(workload(2, 32, 64, 4))
    cost = model(workload(2, 32, 64, 4, e=2))
    assert (cost.flops, cost.softmax_flops, cost.useful_flops) == (
        reference.flops,
        reference.softmax_flops,
        reference.useful_flops,
    )


def test_fused_bytes_spot_check() -> None:
    """Packed QKV GEMM e·(4·b·n·D + 3·D²); fused attention reads Q, K, V and writes O once."""
    b, n, d, h, e = 2, 64, 128, 4, 2
    cost = cost_model.FUSED(workload(b, n, d, h, e=e))
    qkv_gemm = 4 * b * n * d + 3 * d * d
    out_proj = gemm_bytes(b * n, d, d)  # merging the heads of SDPA's token-major output is a view
    assert cost.proj_bytes == e * (qkv_gemm + out_proj)
    assert cost.attn_bytes == e * (4 * b * n * d)
    assert cost.bytes_moved == cost.proj_bytes + cost.attn_bytes


def test_naive_bytes_count_every_pass_over_the_scores() -> None:
    b, n, d, h, e = 1, 256, 64, 4, 4
    plain = cost_model.MATERIALIZED(workload(b, n, d, h, e=e))
    masked = cost_model.MATERIALIZED(workload(b, n, d, h, causal=True, e=e))
    scores = b * h * n * n
    assert masked.attn_bytes - plain.attn_bytes == 2 * scores * e  # the mask: one read and one write
    assert plain.attn_bytes >= 6 * scores * e


@pytest.mark.parametrize(
    ("b", "n", "d", "h", "causal", "kv_heads"),
    [(1, 1, 8, 1, False, None), (1, 128, 512, 8, False, None), (4, 2048, 512, 8, True, None), (2, 64, 64, 8, True, 2)],
)
def test_materialized_and_per_head_move_more_bytes_than_fused(
    b: int, n: int, d: int, h: int, causal: bool, kv_heads: int | None
) -> None:
    w = workload(b, n, d, h, causal, kv_heads)
    fused = cost_model.FUSED(w).bytes_moved
    assert cost_model.MATERIALIZED(w).bytes_moved > fused
    assert cost_model.PER_HEAD(w).bytes_moved > fused


def test_per_head_rereads_input_for_every_thin_gemm() -> None:
    w = workload(1, 128, 256, 8)
    extra = cost_model.PER_HEAD(w).proj_bytes - cost_model.MATERIALIZED(w).proj_bytes
    assert extra == (w.heads + 2 * w.kv_heads - 3) * w.tokens * w.d_model * w.element_bytes


def test_naive_bytes_grow_quadratically_fused_linearly() -> None:
    def attn_bytes(model: cost_model.CostModel, n: int) -> int:
        return model(workload(1, n, 512, 8)).attn_bytes

    assert attn_bytes(cost_model.MATERIALIZED, 4096) / attn_bytes(cost_model.MATERIALIZED, 2048) > 3.5
    assert attn_bytes(cost_model.FUSED, 4096) / attn_bytes(cost_model.FUSED, 2048) == pytest.approx(2.0)


@pytest.mark.parametrize("n", [1, 2, 7, 1024])
def test_causal_useful_flops_are_about_half_the_attention(n: int) -> None:
    cost = cost_model.FUSED(workload(2, n, 64, 4, causal=True))
    useful_attention = cost.useful_flops - cost.proj_flops
    assert useful_attention / cost.attn_flops == pytest.approx((n + 1) / (2 * n))
    assert cost.flops == cost_model.FUSED(workload(2, n, 64, 4)).flops  # executed work is unchanged


def test_intensity_is_flops_over_bytes() -> None:
    for model in (cost_model.MATERIALIZED, cost_model.PER_HEAD, cost_model.FUSED):
        cost = model(workload(2, 100, 96, 3, causal=True))
        assert cost.arithmetic_intensity == pytest.approx(cost.flops / cost.bytes_moved)
        assert cost.proj_intensity == pytest.approx(cost.proj_flops / cost.proj_bytes)
        assert cost.attn_intensity == pytest.approx(cost.attn_flops / cost.attn_bytes)
    half = cost_model.FUSED(workload(2, 100, 96, 3, e=2))
    full = cost_model.FUSED(workload(2, 100, 96, 3, e=4))
    assert half.arithmetic_intensity == pytest.approx(2 * full.arithmetic_intensity)


def test_predicted_peak_of_naive_holds_the_score_matrix() -> None:
    w = workload(1, 2048, 512, 8)
    naive = cost_model.MATERIALIZED(w).predicted_peak_bytes
    fused = cost_model.FUSED(w).predicted_peak_bytes
    assert naive >= w.score_elements * 4 > fused


def test_the_old_name_sdpa_still_resolves_with_a_deprecation_warning() -> None:
    """A plugin that picked ``mhabench.cost.SDPA`` keeps its model (the dense-mask route) and is told the new name."""
    with pytest.warns(DeprecationWarning, match="FUSED_DENSE_MASK"):
        old = cost_model.SDPA
    assert old is cost_model.FUSED_DENSE_MASK and old.dense_mask == "converted"
    with pytest.raises(AttributeError):
        _ = cost_model.NO_SUCH_MODEL
