"""The float64 reference every implementation is checked against before it is timed.

Written independently of the implementations (einsum over explicit head axes, on the CPU in
float64) so that a bug shared by ``naive`` and the others cannot hide.
"""

from __future__ import annotations

import math

import torch

from mhabench.weights import AttentionWeights


def _project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, heads: int) -> torch.Tensor:
    """x (b, n, D) → (b, heads, n, d_k)."""
    out = x @ w if b is None else x @ w + b
    return out.unflatten(-1, (heads, -1)).transpose(1, 2)


def reference_attention(
    weights: AttentionWeights, x: torch.Tensor, heads: int, causal: bool, scale: float | None = None
) -> torch.Tensor:
    """softmax(Q Kᵀ · scale + mask) V W_o in float64, with grouped K/V heads broadcast to their queries.

    ``scale`` defaults to 1/√d_k; the ``unscaled`` ablation passes 1.
    """
    w = weights.to(dtype=torch.float64, device="cpu")
    x = x.to(dtype=torch.float64, device="cpu")
    head_dim = w.d_model // heads
    kv_heads = w.kv_dim // head_dim
    q = _project(x, w.w_q, w.b_q, heads)
    k = _project(x, w.w_k, w.b_k, kv_heads).repeat_interleave(heads // kv_heads, dim=1)
    v = _project(x, w.w_v, w.b_v, kv_heads).repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("bhid,bhjd->bhij", q, k) * (1 / math.sqrt(head_dim) if scale is None else scale)
    if causal:
        n = x.shape[1]
        hidden = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    out = torch.einsum("bhij,bhjd->bhid", scores.softmax(dim=-1), v)
    merged = out.transpose(1, 2).flatten(2)
    return merged @ w.w_o if w.b_o is None else merged @ w.w_o + w.b_o


def decode_reference(weights: AttentionWeights, x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    """Decode of the last token of ``x`` against a cache of the others: the last row of causal attention.

    ``causal`` is ignored: a decoded token sees every cached token whatever the scenario says.
    """
    return reference_attention(weights, x, heads, causal=True)[:, -1:]


# Relative error (max |out − ref| / max |ref|) above which an implementation is wrong, not rounded.
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 4e-2}


def numerical_error(output: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """``(max_abs_err, max_rel_err)`` where the relative error is normalised by max |reference|."""
    diff = (output.detach().to(dtype=torch.float64, device="cpu") - reference).abs().max().item()
    scale = reference.abs().max().item()
    return diff, diff / scale if scale else diff
