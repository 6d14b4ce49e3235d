"""The math ablations: each against its own float64 reference, against naive where it is the same
function, the claim it tests, its cost model against FlopCounterMode, and its parameter count."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from mhabench import AttentionWeights, build
from mhabench import cost as cost_model
from mhabench.cost import Workload
from mhabench.impls import get_spec
from mhabench.impls.reference import TOLERANCE, numerical_error, reference_attention
from mhabench.measure.peaks import DevicePeaks
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.probe import attention_stats as probe_stats
from mhabench.run import runner
from mhabench.run.steps import parameter_count
from mhabench.scenario.loading import parse_config

ABLATIONS = ("shared_qk", "unscaled", "additive", "full_dim_heads")
D_MODEL, HEADS = 32, 4


def _inputs(batch: int = 2, seq_len: int = 7, d_model: int = D_MODEL, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, seq_len, d_model, generator=torch.Generator().manual_seed(seed))


def _workload(seq_len: int = 7, batch: int = 2, heads: int = HEADS, kv_heads: int = HEADS, **kw: object) -> Workload:
    fields = {"element_bytes": 4, "d_model": D_MODEL, "head_dim": D_MODEL // heads} | kw
    return Workload(batch, seq_len, seq_len, heads=heads, kv_heads=kv_heads, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ABLATIONS)
@pytest.mark.parametrize(("causal", "bias"), [(False, False), (True, True)])
def test_matches_its_own_float64_reference(name: str, causal: bool, bias: bool) -> None:
    weights = AttentionWeights.random(D_MODEL, bias=bias, seed=3)
    x = _inputs()
    spec = get_spec(name)
    assert spec.reference is not None and not spec.core
    output = build(name, weights, HEADS, CAUSAL if causal else PLAIN)(x)
    _, rel = numerical_error(output, spec.reference(weights, x, HEADS, CAUSAL if causal else PLAIN))
    assert rel < 1e-5
    _, rel_to_standard = numerical_error(output, reference_attention(weights, x, HEADS, CAUSAL if causal else PLAIN))
    assert rel_to_standard > TOLERANCE["float32"], "an ablation must compute a different function"


@pytest.mark.parametrize("name", ["unscaled", "additive"])
def test_grouped_query_ablations_match_their_reference(name: str) -> None:
    weights = AttentionWeights.random(D_MODEL, seed=4, kv_dim=D_MODEL // HEADS)  # MQA
    x = _inputs()
    output = build(name, weights, HEADS, CAUSAL)(x)
    assert numerical_error(output, get_spec(name).reference(weights, x, HEADS, CAUSAL))[1] < 1e-5


@pytest.mark.parametrize("name", ["shared_qk", "full_dim_heads"])
def test_grouped_query_is_unsupported_where_it_has_no_meaning(
    name: str, tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    """The capability says no grouped K/V; the runner writes an ``unsupported`` row with the reason."""
    assert not get_spec(name).capabilities.grouped_kv
    scenario = {"name": "gqa", "batch": 1, "seq_len": 4, "d_model": D_MODEL, "heads": HEADS, "kv_heads": 2}
    config = parse_config({**tiny_config_data, "scenarios": [scenario], "implementations": [name]}, "gqa.yaml")
    (row,) = runner.run(config, tmp_path).rows
    assert row.status == "unsupported"
    assert row.outcome.error == f"{name}: no grouped K/V heads (kv_heads 2 < heads {HEADS})"


@pytest.mark.usefixtures("one_thread")
def test_additive_blocks_give_the_same_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounding memory by query blocks must not change the result. On one thread: with several, how a busy
    machine splits a reduction between them changes its rounding (the last digits) from call to call."""
    weights, x = AttentionWeights.random(D_MODEL, seed=5), _inputs(seq_len=9)
    whole = build("additive", weights, HEADS)(x)
    monkeypatch.setattr("mhabench.impls.additive.BLOCK_ELEMENTS", 1)  # one query row per block
    assert torch.allclose(build("additive", weights, HEADS)(x), whole, atol=1e-6)


# --- the same function as naive, where the ablation reduces to it ------------------------------


def test_shared_qk_is_naive_on_weights_with_w_k_equal_w_q() -> None:
    weights = AttentionWeights.random(D_MODEL, bias=True, seed=6)
    shared = dataclasses.replace(weights, w_k=weights.w_q, b_k=weights.b_q)
    x = _inputs()
    assert torch.allclose(build("shared_qk", weights, HEADS)(x), build("naive", shared, HEADS)(x), atol=1e-6)


def test_unscaled_is_naive_with_queries_multiplied_by_sqrt_d_k() -> None:
    weights = AttentionWeights.random(D_MODEL, bias=True, seed=7)
    root = math.sqrt(D_MODEL // HEADS)
    boosted = dataclasses.replace(weights, w_q=weights.w_q * root, b_q=weights.b_q * root)
    x = _inputs()
    assert torch.allclose(build("unscaled", weights, HEADS)(x), build("naive", boosted, HEADS)(x), atol=1e-5)


def test_full_dim_heads_with_one_head_is_naive() -> None:
    weights, x = AttentionWeights.random(D_MODEL, bias=True, seed=8), _inputs()
    assert torch.allclose(build("full_dim_heads", weights, 1)(x), build("naive", weights, 1)(x), atol=1e-6)


# --- the claims each ablation tests ------------------------------------------------------------------------


def diagonal_share(scores: torch.Tensor) -> float:
    return probe_stats.diagonal_argmax_share(scores).mean().item()


def softmax_saturation(probs: torch.Tensor) -> tuple[float, float]:
    """(mean row max, mean row entropy) over every row."""
    return probe_stats.row_max(probs).mean().item(), probe_stats.row_entropy(probs).mean().item()


def test_shared_qk_scores_are_symmetric_with_a_dominant_diagonal() -> None:
    """W_Q = W_K makes QKᵀ symmetric PSD and rows peak on the diagonal; separate W_Q, W_K do neither."""
    d_model, heads = 256, 4
    weights, x = AttentionWeights.random(d_model, seed=9), _inputs(batch=1, seq_len=32, d_model=d_model)
    with torch.no_grad():
        shared, _ = build("shared_qk", weights, heads).scores(x)
        shared_k, _ = build("shared_qk", dataclasses.replace(weights, w_q=weights.w_k), heads).scores(x)
        naive = build("naive", weights, heads)  # its own W_Q and W_K
        separate = naive.project_q(x) @ naive.project_kv(x)[0].transpose(-2, -1) / math.sqrt(d_model // heads)
    assert not torch.equal(weights.w_q, weights.w_k)
    assert torch.allclose(shared, shared.transpose(-2, -1))
    assert torch.allclose(shared_k, shared_k.transpose(-2, -1))  # any one shared matrix, W_K's included
    assert not torch.allclose(separate, separate.transpose(-2, -1), atol=1e-2)
    assert diagonal_share(shared) > 0.9 and diagonal_share(shared_k) > 0.9
    assert diagonal_share(separate) < 0.3


def test_unscaled_softmax_saturates_as_head_dim_grows() -> None:
    """Var(q·k) = d_k; without 1/√d_k the softmax concentrates on one key at large d_k."""
    d_model, heads = 512, 2  # d_k = 256
    weights = AttentionWeights.random(d_model, seed=10)
    weights = dataclasses.replace(weights, w_q=weights.w_q * math.sqrt(d_model), w_k=weights.w_k * math.sqrt(d_model))
    scaled = dataclasses.replace(weights, w_q=weights.w_q / math.sqrt(d_model // heads))
    x = _inputs(batch=1, seq_len=64, d_model=d_model) / math.sqrt(d_model)  # unit-variance q and k entries
    with torch.no_grad():
        unscaled_max, unscaled_entropy = softmax_saturation(build("unscaled", weights, heads).probabilities(x)[0])
        scaled_max, scaled_entropy = softmax_saturation(build("unscaled", scaled, heads).probabilities(x)[0])
    assert unscaled_max > 0.8 > 0.3 > scaled_max
    assert unscaled_entropy < 1.0 < 2.5 < scaled_entropy


# --- cost model against torch's FLOP counter -----------------------------------------------


def _counted_flops(name: str, weights: AttentionWeights, heads: int, x: torch.Tensor) -> int:
    module = build(name, weights, heads)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        module(x)  # the MATH backend decomposes SDPA into matmuls that the counter sees
    return counter.get_total_flops()


@pytest.mark.parametrize("name", ["shared_qk", "unscaled", "full_dim_heads"])
def test_matmul_flops_equal_flop_counter(name: str) -> None:
    weights, x = AttentionWeights.random(D_MODEL), _inputs()
    cost = get_spec(name).cost(_workload())
    assert _counted_flops(name, weights, HEADS, x) == cost.flops


def test_additive_flops_are_the_counted_matmuls_plus_add_and_tanh() -> None:
    """The counter sees the v-contraction and P·V (4·d_k per score); add and tanh (2·d_k) it does not."""
    weights, x = AttentionWeights.random(D_MODEL), _inputs()
    w = _workload()
    cost = get_spec("additive").cost(w)
    assert cost.attn_flops == 6 * w.score_elements * w.head_dim
    assert _counted_flops("additive", weights, HEADS, x) == cost.flops - 2 * w.score_elements * w.head_dim


def test_ablation_costs_relative_to_the_standard_layer() -> None:
    w = _workload(seq_len=64)
    standard = cost_model.MATERIALIZED(w)
    assert cost_model.SHARED_QK(w).proj_flops * 4 == standard.proj_flops * 3
    assert cost_model.UNSCALED(w).attn_bytes == standard.attn_bytes - 2 * w.score_elements * 4
    additive = get_spec("additive").cost(w)
    # the n·L·d_k intermediate is written, read and written by tanh, read by the v-contraction; no scale pass
    intermediate = w.score_elements * w.head_dim
    assert additive.attn_bytes == standard.attn_bytes + (4 * intermediate - 2 * w.score_elements) * 4
    full = cost_model.FULL_DIM_HEADS(w)
    assert full.proj_flops == HEADS * standard.proj_flops
    assert full.attn_flops == HEADS * standard.attn_flops


# --- parameters (the layouts hold the same weights) ------------------------------


@pytest.mark.parametrize("kv_dim", [D_MODEL, D_MODEL // HEADS])
def test_params_per_head_equal_fused_and_follow_kv_heads(kv_dim: int) -> None:
    weights = AttentionWeights.random(D_MODEL, bias=True, kv_dim=kv_dim)
    counts = {name: parameter_count(build(name, weights, HEADS)) for name in ("naive", "per_head", "fused")}
    assert counts["per_head"] == counts["fused"] == counts["naive"] == weights.parameter_count()
    assert counts["naive"] == 2 * D_MODEL * D_MODEL + 2 * D_MODEL * kv_dim + 2 * D_MODEL + 2 * kv_dim


def test_params_of_the_ablations() -> None:
    weights = AttentionWeights.random(D_MODEL)
    standard = 4 * D_MODEL**2
    assert parameter_count(build("torch_mha", weights, HEADS)) == standard
    assert parameter_count(build("full_dim_heads", weights, HEADS)) == HEADS * standard
    assert parameter_count(build("shared_qk", weights, HEADS)) == 3 * D_MODEL**2
    assert parameter_count(build("additive", weights, HEADS)) == standard + D_MODEL  # + v, d_k per head
