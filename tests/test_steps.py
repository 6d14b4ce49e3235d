"""Workload modes: GQA/MQA configs, KV-cache decode, training steps, and their cost model."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
from plain_cases import plain_case
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from mhabench import AttentionWeights, build
from mhabench import cost as cost_model
from mhabench.cost import Workload
from mhabench.errors import ConfigError
from mhabench.impls import get_spec
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.reference import decode_reference, numerical_error
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.run.runner import run
from mhabench.run.steps import parameter_count, prepare
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.loading import parse_config

DECODERS = ("naive", "per_head", "fused")
D_MODEL, HEADS = 32, 4


def _scenario(**fields: Any) -> dict[str, Any]:
    return {"scenarios": [{"seq_len": 8, "d_model": D_MODEL, "heads": HEADS, **fields}]}


# --- config ----------------------------------------------------------------------------------


def test_kv_heads_must_divide_heads() -> None:
    with pytest.raises(ConfigError, match=r"^x.yaml: scenarios\[0\].kv_heads: heads 4 is not divisible by kv_heads 3$"):
        parse_config(_scenario(kv_heads=[4, 3]), "x.yaml")


def test_kv_heads_mode_and_phase_expand_into_cases() -> None:
    config = parse_config(_scenario(kv_heads=[4, 1], mode=["forward", "train"]), "x.yaml")
    cases = expand_cases(config, torch.device("cpu"))
    assert [(c.kv_heads, c.mode) for c in cases] == [(4, "forward"), (4, "train"), (1, "forward"), (1, "train")]
    assert cases[3].case_id == "scenario/b1-n8-d32-h4-kv1-float32-train"
    (unset,) = expand_cases(parse_config(_scenario(), "x.yaml"), torch.device("cpu"))
    assert unset.kv_heads == HEADS  # unset: plain MHA


def test_decode_cannot_train() -> None:
    with pytest.raises(ConfigError, match=r"scenarios\[0\].phase: decode cannot be combined with mode train"):
        parse_config(_scenario(mode="train", phase="decode"), "x.yaml")


# --- decode ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize(("kv_heads", "bias"), [(HEADS, True), (2, False), (1, True)])
def test_decode_step_matches_last_row_of_causal_attention(name: str, kv_heads: int, bias: bool) -> None:
    weights = AttentionWeights.random(D_MODEL, bias=bias, seed=1, kv_dim=kv_heads * D_MODEL // HEADS)
    x = torch.randn(3, 10, D_MODEL, generator=torch.Generator().manual_seed(2))
    module = build(name, weights, HEADS)
    with torch.no_grad():
        cache = KVCache.prefill(*module.project_kv(x[:, :-1]))
        first = module.decode_step(x[:, -1:], cache)
        again = module.decode_step(x[:, -1:], cache)  # the timed step is repeatable: same slot, same work
    assert numerical_error(first, decode_reference(weights, x, HEADS, PLAIN))[1] < 1e-5
    assert torch.equal(first, again)
    assert cache.nbytes == 2 * 3 * kv_heads * 10 * (D_MODEL // HEADS) * 4  # GQA shrinks the cache by G


def _decode_cost(batch: int, kv_heads: int = 8, cache_len: int = 4096) -> Any:
    heads, d_model, e = 32, 4096, 2
    return cost_model.FUSED(Workload(batch, 1, cache_len + 1, d_model, heads, kv_heads, d_model // heads, e))


def test_decode_attention_intensity_is_flat_in_batch_projections_rise() -> None:
    """Performance model: attention ≈ 2·G/e whatever the batch, projections ≈ 2·b/e."""
    batches = [1, 4, 16, 64, 256]
    costs = [_decode_cost(b) for b in batches]
    attn = [c.attn_intensity for c in costs]
    proj = [c.proj_intensity for c in costs]
    assert max(attn) / min(attn) < 1.001
    assert attn[0] == pytest.approx(2 * 4 / 2, rel=0.01)  # G = 32 / 8 = 4, bf16
    assert all(a < b for a, b in itertools.pairwise(proj))
    assert proj[0] == pytest.approx(2 * 1 / 2, rel=0.01)
    assert proj[-1] > 50 * proj[0]
    assert _decode_cost(1, kv_heads=32).attn_intensity == pytest.approx(1.0, rel=0.01)  # MHA bf16: ~1 FLOP/byte


def test_decode_workload_is_one_query_against_the_cache() -> None:
    case = plain_case("s", 2, 16, 32, 4, True, False, "float32", 0, kv_heads=2, phase="decode")
    w = case.workload()
    assert (w.seq_len, w.kv_len, w.kv_heads, w.causal, w.tokens) == (1, 17, 2, False, 2)


# --- train -----------------------------------------------------------------------------------


def _fields(weights: AttentionWeights) -> dict[str, torch.Tensor]:
    return {f.name: t for f in dataclasses.fields(weights) if (t := getattr(weights, f.name)) is not None}


def _split_packed(grad: torch.Tensor, kv_dim: int, prefix: str) -> dict[str, torch.Tensor]:
    """A packed Q|K|V gradient (last dim d_model + 2·kv_dim) as its three parts."""
    q, k, v = grad.split([D_MODEL, kv_dim, kv_dim], dim=-1)
    return {f"{prefix}_q": q, f"{prefix}_k": k, f"{prefix}_v": v}


def _canonical_gradients(name: str, module: nn.Module, kv_dim: int) -> dict[str, torch.Tensor]:
    """The module's own parameter gradients in the (w_q, w_k, w_v, w_o, biases) layout of AttentionWeights.

    Each layout holds its own copies of the weights (frozen Parameters are new leaves), so the gradients
    live on the module, in its layout: packed and transposed for fused and torch_mha, blocks for per_head.
    """
    if name == "fused":
        return {
            **_split_packed(module.w_qkv.grad.t(), kv_dim, "w"),
            **_split_packed(module.b_qkv.grad, kv_dim, "b"),
            "w_o": module.w_out.grad.t(),
            "b_o": module.b_out.grad,
        }
    if name == "per_head":
        grads = {"w_o": module.w_o.grad, "b_o": module.b_o.grad}
        for part in "qkv":
            blocks = getattr(module, f"{part}_heads")
            grads[f"w_{part}"] = torch.cat([w.grad for w in blocks.weights], dim=1)
            grads[f"b_{part}"] = torch.cat([b.grad for b in blocks.biases])
        return grads
    if name == "torch_mha":
        mha = module.mha
        return {
            **_split_packed(mha.in_proj_weight.grad.t(), kv_dim, "w"),
            **_split_packed(mha.in_proj_bias.grad, kv_dim, "b"),
            "w_o": mha.out_proj.weight.grad.t(),
            "b_o": mha.out_proj.bias.grad,
        }
    return {n: p.grad for n, p in module.named_parameters()}  # naive holds the four projections as they are


def _gradients(
    name: str, weights: AttentionWeights, x: torch.Tensor, grad_out: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Gradients w.r.t. x and the module's parameters, mapped to the canonical weight layout."""
    module, x = build(name, weights, HEADS, CAUSAL).requires_grad_(), x.detach().requires_grad_()
    module(x).backward(grad_out)
    grads = _canonical_gradients(name, module, weights.kv_dim)
    assert set(grads) == set(_fields(weights)), name
    return {"x": x.grad, **grads}


@pytest.mark.parametrize("name", ["per_head", "fused"])
@pytest.mark.parametrize("kv_heads", [HEADS, 1])
def test_train_gradients_equal_naive(name: str, kv_heads: int) -> None:
    weights = AttentionWeights.random(D_MODEL, bias=True, seed=3, kv_dim=kv_heads * D_MODEL // HEADS)
    x, grad_out = torch.randn(2, 6, D_MODEL), torch.randn(2, 6, D_MODEL)
    expected, got = _gradients("naive", weights, x, grad_out), _gradients(name, weights, x, grad_out)
    assert set(expected) == set(got) == {"x", *_fields(weights)}
    for key, grad in expected.items():
        assert got[key].shape == grad.shape, key
        assert torch.allclose(got[key], grad, atol=1e-5), key
    assert not any(t.requires_grad for t in _fields(weights).values()), "the shared weights stay untouched"


def test_torch_mha_gradients_map_back_to_naive() -> None:
    """torch_mha copies the weights into its packed in_proj (F.linear layout): its grads map back to naive's."""
    weights = AttentionWeights.random(D_MODEL, bias=True, seed=4)
    x, grad_out = torch.randn(2, 6, D_MODEL), torch.randn(2, 6, D_MODEL)
    expected, got = _gradients("naive", weights, x, grad_out), _gradients("torch_mha", weights, x, grad_out)
    for key, grad in expected.items():
        assert torch.allclose(got[key], grad, atol=1e-5), key


def test_train_step_differentiates_the_modules_own_tensors() -> None:
    case = plain_case("s", 1, 5, D_MODEL, HEADS, False, True, "float32", 0, mode="train")
    weights, x = AttentionWeights.random(D_MODEL, bias=True), torch.randn(1, 5, D_MODEL)
    module, step = prepare(get_spec("per_head"), case, weights, x)
    step.run()
    tensors = list(module.parameters())
    assert len(tensors) == 3 * HEADS * 2 + 2 and all(t.requires_grad for t in tensors)
    assert parameter_count(module) == weights.parameter_count()  # 3h blocks hold the same scalars as 4 matrices
    assert not weights.w_q.requires_grad, "the shared weights stay untouched"


def test_backward_flops_follow_the_convention_and_the_counter() -> None:
    """GEMMs 2×, attention 2.5× forward; naive keeps P, so the counter sees 2× for its attention."""
    w = Workload(2, 6, 6, D_MODEL, HEADS, HEADS, D_MODEL // HEADS, 4, train=True)
    forward = cost_model.MATERIALIZED(dataclasses.replace(w, train=False))
    cost = cost_model.MATERIALIZED(w)
    assert cost.backward_flops == 2 * forward.proj_flops + 5 * forward.attn_flops // 2
    assert cost.flops == forward.flops + cost.backward_flops
    assert cost.bytes_moved == 3 * forward.bytes_moved
    module = build("naive", AttentionWeights.random(D_MODEL), HEADS).requires_grad_()  # dW of every GEMM
    x = torch.randn(2, 6, D_MODEL, requires_grad=True)  # dX of the first GEMMs counts too
    with FlopCounterMode(display=False) as counter:
        out = module(x)
    forward_counted = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        out.sum().backward()
    assert forward_counted == forward.flops
    assert counter.get_total_flops() == cost.backward_flops - forward.attn_flops // 2


# --- through the runner ----------------------------------------------------------------------


def test_tiny_decode_and_train_run(tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: object) -> None:
    tiny_config_data["implementations"] = ["naive", "fused", "torch_mha"]
    tiny_config_data["scenarios"] = [
        {"name": "dec", "batch": 2, "seq_len": 9, "d_model": 16, "heads": 4, "kv_heads": 2, "phase": "decode"},
        {"name": "tr", "batch": 1, "seq_len": 5, "d_model": 16, "heads": 2, "mode": "train"},
    ]
    rows = run(parse_config(tiny_config_data, "tiny.yaml"), tmp_path).frame.set_index(["scenario", "impl"])
    for impl in ("naive", "fused"):
        decode, train = rows.loc[("dec", impl)], rows.loc[("tr", impl)]
        assert decode.status == "ok" and train.status == "ok", (decode.error, train.error)
        assert (decode.phase, decode.kv_heads, decode.kv_cache_bytes) == ("decode", 2, 2 * 2 * 2 * 10 * 4 * 4)
        assert decode.tokens_per_s == pytest.approx(2 / (decode.latency_ms / 1e3))
        assert train["mode"] == "train" and train.backward_flops > 0 and train.peak_memory_bytes > 0
    assert rows.loc[("dec", "torch_mha")].status == "unsupported"
    assert rows.loc[("dec", "torch_mha")].error == "torch_mha: no grouped K/V heads (kv_heads 2 < heads 4)"
    assert rows.loc[("tr", "torch_mha")].status == "ok"
    assert rows.loc[("tr", "naive")].params == rows.loc[("tr", "fused")].params == 4 * 16 * 16
