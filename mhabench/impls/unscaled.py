"""Ablation ``unscaled``: dot-product attention without the 1/√d_k factor (seed 004).

Seed 004's argument: with unit-variance query and key entries Var(q·k) = d_k, so unscaled scores
grow like √d_k and the softmax saturates (one key takes almost all the probability, gradients
vanish) as heads get wider; dividing by √d_k restores variance 1. :func:`softmax_saturation`
measures it on real projections. Same FLOPs as ``naive``; the bytes model (``unscaled``) is the
``materialized`` one without the elementwise scale pass over the scores.
"""

from __future__ import annotations

import torch

from mhabench.impls.base import AttentionModule, causal_mask, linear, repeat_kv
from mhabench.impls.registry import register
from mhabench.reference import reference_attention
from mhabench.weights import AttentionWeights


def unscaled_reference(weights: AttentionWeights, x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    """float64 reference: softmax(Q Kᵀ) V W_o, no 1/√d_k."""
    return reference_attention(weights, x, heads, causal, scale=1.0)


@register(
    "unscaled",
    description="ablation: materialized softmax(QKᵀ)·V without the 1/√d_k scale (seed 004: saturation)",
    traffic="unscaled",
    reference=unscaled_reference,
)
class UnscaledAttention(AttentionModule):
    """``naive`` with the scale factor left out; grouped K/V heads are copied to their queries."""

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = False) -> None:
        super().__init__(weights, heads, causal)
        self.weights = weights

    def probabilities(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention probabilities (b, h, n, n) and the values (b, h, n, d_k) they weight."""
        w, groups = self.weights, self.heads // self.kv_heads
        q = self.split_heads(linear(x, w.w_q, w.b_q), self.heads)
        k = repeat_kv(self.split_heads(linear(x, w.w_k, w.b_k), self.kv_heads), groups)
        v = repeat_kv(self.split_heads(linear(x, w.w_v, w.b_v), self.kv_heads), groups)
        scores = q @ k.transpose(-2, -1)
        if self.causal:
            scores = scores.masked_fill(causal_mask(x.shape[1], x.shape[1], x.device), float("-inf"))
        return scores.softmax(dim=-1), v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs, v = self.probabilities(x)
        return linear(self.merge_heads(probs @ v), self.weights.w_o, self.weights.b_o)


def softmax_saturation(probs: torch.Tensor) -> tuple[float, float]:
    """``(mean max probability, mean entropy in nats)`` over every row of ``probs`` (…, n, L)."""
    entropy = -(probs * probs.clamp_min(torch.finfo(probs.dtype).tiny).log()).sum(dim=-1)
    return probs.amax(dim=-1).mean().item(), entropy.mean().item()
