"""Textbook multi-head attention: three big projections, explicit QKᵀ/√d_k, softmax, ·V."""

from __future__ import annotations

import torch

from mhabench import cost
from mhabench.impls.base import AttentionModule, linear, materialized_attention, repeat_kv
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import EVERY_PATTERN, Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern


@register(
    "naive",
    description="Q/K/V GEMMs, explicit softmax(QKᵀ/√d_k)·V with the n×n scores materialized, W_o",
    cost=cost.MATERIALIZED,
    capabilities=Capabilities(decode=True, **EVERY_PATTERN),
    core=True,
)
class NaiveAttention(AttentionModule):
    """The annotated-transformer version; the reference point every speedup is measured against."""

    scaled = True  # divide the scores by √d_k (the ``unscaled`` ablation turns this off)

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        self.hold(weights)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``x`` as (b, kv_heads, n, d_k); also fills the decode cache."""
        k = self.split_heads(linear(x, self.w_k, self.b_k), self.kv_heads)
        v = self.split_heads(linear(x, self.w_v, self.b_v), self.kv_heads)
        return k, v

    def project_q(self, x: torch.Tensor) -> torch.Tensor:
        """Queries of ``x`` as (b, heads, n, d_k)."""
        return self.split_heads(linear(x, self.w_q, self.b_q), self.heads)

    def attend(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        """Q projection of ``x``, materialized attention over ``k``/``v`` (K/V copied per query head), W_o."""
        groups = self.heads // self.kv_heads
        q = self.project_q(x)
        mask = self.dense_mask(q, k.shape[-2])
        out = materialized_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), causal, self.scaled, mask)
        return linear(self.merge_heads(out), self.w_o, self.b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attend(x, *self.project_kv(x), self.causal)

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence (b, 1, D) against the cache; it sees every cached token (a window: the
        last ``window``)."""
        return self.attend(x, *self.window(*cache.append(*self.project_kv(x))), causal=False)
