"""Ablation ``additive``: Bahdanau scores vᵀ·tanh(q_i + k_j) per head instead of q_i·k_j.

Dot-product and additive attention (Luong et al. 2015 compare them) are both O(n²·d), but the additive score
needs d_k adds, d_k tanh and d_k multiply-adds per (query, key) pair and, done with tensor ops, an
n×L×d_k intermediate — where the dot product is one GEMM. The FLOPs and bytes of that are written
out in :mod:`mhabench.cost` (``additive_model``).

The queries and keys are the usual per-head projections (so Bahdanau's W_q q + W_k k is the shared
W_Q/W_K applied to x); each head h also has its own score vector v_h of d_k entries. It is not part
of :class:`AttentionWeights`, so it is derived deterministically: drawn in float64 from a generator
seeded with :data:`SCORE_VECTOR_SEED` and scaled by 1/√d_k, the same numbers for a given
(heads, d_k) on every dtype and device, and the float64 reference uses the unrounded values.

To keep memory bounded the intermediate is built one block of query rows at a time
(:data:`BLOCK_ELEMENTS` at most per block); the bytes moved are the same as one big block.
"""

from __future__ import annotations

import math

import torch

from mhabench import cost
from mhabench.impls.base import AttentionModule, causal_mask, frozen, linear, repeat_kv
from mhabench.impls.registry import register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern

SCORE_VECTOR_SEED = 4
"""Seed of the generator that draws the score vectors v (fixed, so every run uses the same v)."""
BLOCK_ELEMENTS = 1 << 24
"""Cap on the elements of one block of the (b, h, rows, L, d_k) tanh intermediate."""


def score_vector(heads: int, head_dim: int, dtype: torch.dtype = torch.float64, device: str = "cpu") -> torch.Tensor:
    """The per-head score vectors v, shape (heads, d_k), entries with standard deviation 1/√d_k."""
    generator = torch.Generator().manual_seed(SCORE_VECTOR_SEED)
    v = torch.randn(heads, head_dim, generator=generator, dtype=torch.float64) / math.sqrt(head_dim)
    return v.to(dtype=dtype, device=device)


def additive_scores(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """scores[b, h, i, j] = v_h · tanh(q[b, h, i] + k[b, h, j]); q (b, h, n, d), k (b, h, L, d), v (h, d)."""
    batch, heads, kv_len, head_dim = k.shape
    rows = max(1, BLOCK_ELEMENTS // (batch * heads * kv_len * head_dim))
    blocks = [
        torch.einsum("bhnld,hd->bhnl", (q_rows.unsqueeze(-2) + k.unsqueeze(-3)).tanh_(), v)
        for q_rows in q.split(rows, dim=2)
    ]
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=2)


def additive_reference(
    weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern
) -> torch.Tensor:
    """float64 reference, one head at a time with an explicit loop (independent of the blocked code)."""
    w = weights.to(dtype=torch.float64, device="cpu")
    x = x.to(dtype=torch.float64, device="cpu")
    head_dim = w.q_dim // heads
    groups = heads // (w.kv_dim // head_dim)
    q, k, vals = (x @ m if b is None else x @ m + b for m, b in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v)))
    v = score_vector(heads, head_dim)
    outputs = []
    for head in range(heads):
        cols = slice(head * head_dim, (head + 1) * head_dim)
        kv_cols = slice((head // groups) * head_dim, (head // groups + 1) * head_dim)
        tanh = torch.tanh(q[:, :, None, cols] + k[:, None, :, kv_cols])  # (b, n, L, d_k)
        scores = tanh @ v[head]
        if pattern.causal:
            scores = scores.masked_fill(torch.ones_like(scores[0], dtype=torch.bool).triu(1), float("-inf"))
        outputs.append(scores.softmax(dim=-1) @ vals[:, :, kv_cols])
    merged = torch.cat(outputs, dim=-1)
    return merged @ w.w_o if w.b_o is None else merged @ w.w_o + w.b_o


@register(
    "additive",
    description="ablation: additive scores vᵀ·tanh(q_i + k_j) per head (Bahdanau et al. 2015), materialized",
    cost=cost.additive_model(BLOCK_ELEMENTS),
    reference=additive_reference,
)
class AdditiveAttention(AttentionModule):
    """Projections as in ``naive``; scores from a tanh of sums and a learned vector instead of QKᵀ/√d_k."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        self.hold(weights)
        self.score_vector = frozen(score_vector(heads, self.head_dim, weights.w_q.dtype, weights.w_q.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = self.heads // self.kv_heads
        q = self.split_heads(linear(x, self.w_q, self.b_q), self.heads)
        k = repeat_kv(self.split_heads(linear(x, self.w_k, self.b_k), self.kv_heads), groups)
        vals = repeat_kv(self.split_heads(linear(x, self.w_v, self.b_v), self.kv_heads), groups)
        scores = additive_scores(q, k, self.score_vector)
        if self.causal:
            scores = scores.masked_fill(causal_mask(x.shape[1], x.shape[1], x.device), float("-inf"))
        return linear(self.merge_heads(scores.softmax(dim=-1) @ vals), self.w_o, self.b_o)
