"""Ablation ``shared_qk``: one matrix for queries and keys, W_K := W_Q.

Why does attention have separate W_Q and W_K? With one shared matrix the scores of a head are
S = (X W)(X W)ᵀ / √d_k: symmetric and positive semi-definite. That bounds S_ij by √(S_ii·S_jj); it
does not make the diagonal win every row, but it favours it. ``mhabench probe`` measures how often.

Only one projection GEMM serves Q and K, so the layer has 3·D² weights and 6·b·n·D² projection
FLOPs instead of 4·D² and 8·b·n·D² (cost model ``shared_qk``).
"""

from __future__ import annotations

import dataclasses
import math

import torch

from mhabench import cost
from mhabench.impls.base import AttentionModule, causal_mask, linear
from mhabench.impls.reference import reference_attention
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern


def shared_weights(weights: AttentionWeights) -> AttentionWeights:
    """The shared weight set with W_K := W_Q (and b_K := b_Q): the function this ablation computes."""
    return dataclasses.replace(weights, w_k=weights.w_q, b_k=weights.b_q)


def shared_qk_reference(
    weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern
) -> torch.Tensor:
    """float64 reference: standard attention on the weights with W_K replaced by W_Q."""
    return reference_attention(shared_weights(weights), x, heads, pattern)


@register(
    "shared_qk",
    description="ablation: W_K := W_Q, one GEMM for queries and keys, symmetric QQᵀ scores",
    cost=cost.SHARED_QK,
    capabilities=Capabilities(grouped_kv=False),
    reference=shared_qk_reference,
)
class SharedQKAttention(AttentionModule):
    """Materialized attention whose keys are its queries: scores = Q Qᵀ / √d_k."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        self.hold(shared_weights(weights))
        del self.w_k, self.b_k  # the keys are the queries: no K projection

    def scores(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-softmax scores (b, h, n, n) and the queries (b, h, n, d_k) they came from."""
        q = self.split_heads(linear(x, self.w_q, self.b_q), self.heads)
        scores = q @ q.transpose(-2, -1) / math.sqrt(self.head_dim)
        if self.causal:
            scores = scores.masked_fill(causal_mask(x.shape[1], x.shape[1], x.device), float("-inf"))
        return scores, q

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.split_heads(linear(x, self.w_v, self.b_v), self.heads)  # projections first: the stage rules
        scores, _ = self.scores(x)  # read a GEMM just before the softmax as the scores (docs/stages.md)
        return linear(self.merge_heads(scores.softmax(dim=-1) @ v), self.w_o, self.b_o)
