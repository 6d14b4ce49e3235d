"""One small projection matrix per head and a Python loop over heads (seed 001's "3h matrices")."""

from __future__ import annotations

import torch

from mhabench.impls.base import AttentionModule, linear, materialized_attention
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import register
from mhabench.weights import AttentionWeights


def _column_blocks(
    w: torch.Tensor, b: torch.Tensor | None, n_blocks: int
) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Contiguous copies of the ``n_blocks`` column slices of ``w`` (and of ``b``)."""
    width = w.shape[1] // n_blocks
    return [
        (
            w[:, i * width : (i + 1) * width].contiguous(),
            None if b is None else b[i * width : (i + 1) * width].contiguous(),
        )
        for i in range(n_blocks)
    ]


@register(
    "per_head",
    description="h separate (d_model, d_k) Q/K/V matrices, Python loop over heads, concat, W_o",
    traffic="per_head",
    core=True,
)
class PerHeadAttention(AttentionModule):
    """Same parameters and outputs as ``naive``, laid out as 3h small matrices instead of 3 big ones.

    Each head re-reads the whole input three times and runs three thin GEMMs; the heads' outputs
    are concatenated before W_o. Grouped-query heads share the K/V projection of their group,
    computed once per group.
    """

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = False) -> None:
        super().__init__(weights, heads, causal)
        self.q_heads = _column_blocks(weights.w_q, weights.b_q, heads)
        self.k_heads = _column_blocks(weights.w_k, weights.b_k, self.kv_heads)
        self.v_heads = _column_blocks(weights.w_v, weights.b_v, self.kv_heads)
        self.w_o, self.b_o = weights.w_o, weights.b_o

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = self.heads // self.kv_heads
        head_outputs = []
        for group, ((w_k, b_k), (w_v, b_v)) in enumerate(zip(self.k_heads, self.v_heads, strict=True)):
            k, v = linear(x, w_k, b_k), linear(x, w_v, b_v)
            for w_q, b_q in self.q_heads[group * groups : (group + 1) * groups]:
                q = linear(x, w_q, b_q)
                head_outputs.append(materialized_attention(q, k, v, self.causal))
        return linear(torch.cat(head_outputs, dim=-1), self.w_o, self.b_o)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values as (b, kv_heads, n, d_k), one thin GEMM per group each (decode cache layout)."""
        k = torch.stack([linear(x, w, b) for w, b in self.k_heads], dim=1)
        v = torch.stack([linear(x, w, b) for w, b in self.v_heads], dim=1)
        return k, v

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence (b, 1, D): the same per-head loop, over the cached keys/values."""
        keys, values = cache.append(*self.project_kv(x))
        groups = self.heads // self.kv_heads
        head_outputs = []
        for head, (w_q, b_q) in enumerate(self.q_heads):
            q = linear(x, w_q, b_q)
            group = head // groups
            head_outputs.append(materialized_attention(q, keys[:, group], values[:, group], causal=False))
        return linear(torch.cat(head_outputs, dim=-1), self.w_o, self.b_o)
