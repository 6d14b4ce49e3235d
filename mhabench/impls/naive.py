"""Textbook multi-head attention: three big projections, explicit QKᵀ/√d_k, softmax, ·V."""

from __future__ import annotations

import torch

from mhabench.impls.base import AttentionModule, linear, materialized_attention, repeat_kv
from mhabench.impls.registry import register
from mhabench.weights import AttentionWeights


@register(
    "naive",
    description="Q/K/V GEMMs, explicit softmax(QKᵀ/√d_k)·V with the n×n scores materialized, W_o",
    traffic="materialized",
    core=True,
)
class NaiveAttention(AttentionModule):
    """The annotated-transformer version; the reference point every speedup is measured against."""

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = False) -> None:
        super().__init__(weights, heads, causal)
        self.weights = weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weights
        q = self.split_heads(linear(x, w.w_q, w.b_q), self.heads)
        k = self.split_heads(linear(x, w.w_k, w.b_k), self.kv_heads)
        v = self.split_heads(linear(x, w.w_v, w.b_v), self.kv_heads)
        groups = self.heads // self.kv_heads
        out = materialized_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), self.causal)
        return linear(self.merge_heads(out), w.w_o, w.b_o)
