"""Textbook multi-head attention: three big projections, explicit QKᵀ/√d_k, softmax, ·V."""

from __future__ import annotations

import torch

from mhabench.impls.base import AttentionModule, linear, materialized_attention, repeat_kv
from mhabench.impls.kv_cache import KVCache
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

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``x`` as (b, kv_heads, n, d_k); also fills the decode cache."""
        w = self.weights
        k = self.split_heads(linear(x, w.w_k, w.b_k), self.kv_heads)
        v = self.split_heads(linear(x, w.w_v, w.b_v), self.kv_heads)
        return k, v

    def attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        """Q projection of ``x``, materialized attention over ``k``/``v`` (K/V copied per query head), W_o."""
        w = self.weights
        q = self.split_heads(linear(x, w.w_q, w.b_q), self.heads)
        groups = self.heads // self.kv_heads
        out = materialized_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), causal)
        return linear(self.merge_heads(out), w.w_o, w.b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attend(x, *self.project_kv(x), self.causal)

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence (b, 1, D) against the cache; it sees every cached token."""
        return self.attend(x, *cache.append(*self.project_kv(x)), causal=False)
