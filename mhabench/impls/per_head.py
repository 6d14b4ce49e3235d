"""One small projection matrix per head and a Python loop over heads: the "3h small matrices" layout."""

from __future__ import annotations

import torch
from torch import nn

from mhabench import cost
from mhabench.impls.base import AttentionModule, frozen, linear, materialized_attention
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import EVERY_PATTERN, Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern


class HeadBlocks(nn.Module):
    """The ``n_blocks`` column slices of one projection, each a contiguous frozen (d_model, d_k) matrix."""

    def __init__(self, w: torch.Tensor, b: torch.Tensor | None, n_blocks: int) -> None:
        super().__init__()
        self.weights = nn.ParameterList([frozen(block.contiguous()) for block in w.chunk(n_blocks, dim=1)])
        self.biases = None if b is None else nn.ParameterList([frozen(part.clone()) for part in b.chunk(n_blocks)])

    def __len__(self) -> int:
        return len(self.weights)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.weights[index], None if self.biases is None else self.biases[index]

    def blocks(self) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        return [self[i] for i in range(len(self))]


@register(
    "per_head",
    description="h separate (d_model, d_k) Q/K/V matrices, Python loop over heads, concat, W_o",
    cost=cost.PER_HEAD,
    capabilities=Capabilities(decode=True, **EVERY_PATTERN),
    core=True,
)
class PerHeadAttention(AttentionModule):
    """Same parameters and outputs as ``naive``, laid out as 3h small matrices instead of 3 big ones.

    Each head re-reads the whole input three times and runs three thin GEMMs; the heads' outputs
    are concatenated before W_o. Grouped-query heads share the K/V projection of their group,
    computed once per group.
    """

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        self.q_heads = HeadBlocks(weights.w_q, weights.b_q, heads)
        self.k_heads = HeadBlocks(weights.w_k, weights.b_k, self.kv_heads)
        self.v_heads = HeadBlocks(weights.w_v, weights.b_v, self.kv_heads)
        self.w_o, self.b_o = frozen(weights.w_o), frozen(weights.b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = self.heads // self.kv_heads
        head_outputs = []
        mask = self.dense_mask(x, x.shape[1])
        kv_blocks = zip(self.k_heads.blocks(), self.v_heads.blocks(), strict=True)
        for group, ((w_k, b_k), (w_v, b_v)) in enumerate(kv_blocks):
            k, v = linear(x, w_k, b_k), linear(x, w_v, b_v)
            for index in range(group * groups, (group + 1) * groups):
                w_q, b_q = self.q_heads[index]
                q = linear(x, w_q, b_q)
                head_mask = None if mask is None else mask.head(index)
                head_outputs.append(materialized_attention(q, k, v, self.causal, mask=head_mask))
        return linear(torch.cat(head_outputs, dim=-1), self.w_o, self.b_o)

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values as (b, kv_heads, n, d_k), one thin GEMM per group each (decode cache layout)."""
        k = torch.stack([linear(x, w, b) for w, b in self.k_heads.blocks()], dim=1)
        v = torch.stack([linear(x, w, b) for w, b in self.v_heads.blocks()], dim=1)
        return k, v

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence (b, 1, D): the same per-head loop, over the cached keys/values."""
        keys, values = self.window(*cache.append(*self.project_kv(x)))
        groups = self.heads // self.kv_heads
        head_outputs = []
        mask = self.dense_mask(x, keys.shape[2])
        for head, (w_q, b_q) in enumerate(self.q_heads.blocks()):
            q = linear(x, w_q, b_q)
            group = head // groups
            head_mask = None if mask is None else mask.head(head)
            head_outputs.append(materialized_attention(q, keys[:, group], values[:, group], False, mask=head_mask))
        return linear(torch.cat(head_outputs, dim=-1), self.w_o, self.b_o)
