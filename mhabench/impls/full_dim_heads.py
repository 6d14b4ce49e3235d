"""Ablation ``full_dim_heads``: every head keeps all d_model dimensions (seeds 000 and 002).

Seed 000 explains why each head works in d_k = d_model / h: the h heads together cost what one
full-width head costs and the layer keeps 4·D² projection weights whatever h is. This ablation is
the design that reduction avoids — h heads of width D each — so its projections have 4·h·D²
weights and 8·b·n·h·D² FLOPs and its attention 4·b·h·n·L·D FLOPs (h× ``fused``; cost model
``full_dim_heads``). It uses the ``fused`` layout (one packed QKV GEMM, SDPA, one W_o GEMM).

Weights, derived deterministically from the shared set so no extra seed is needed. Head i's (D, D)
Q and V matrices are the shared W_Q and W_V with their columns rotated left by i·d_k
(``torch.roll``, a permutation Π_i); its K matrix is W_K and its (D, D) block of the (h·D, D)
output matrix is W_O / √h. So head i scores with W_Q Π_i W_Kᵀ and maps values with W_V Π_i W_O:
every head computes a different function (for random weights the heads' bilinear forms are
uncorrelated, since tr(Π_iᵀ Π_j) = 0 for i ≠ j), and the √h keeps the sum of h uncorrelated heads
at the reduced layer's scale. Rotating Q and K (or V and O) by the same amount would not do: a dot
product is invariant to a permutation applied to both sides, so every head would compute the same
scores and the layer would be √h × one head. Head 0 is the shared set itself, so h = 1 is the
standard layer. b_Q and b_V rotate with their columns; b_K and b_O are shared.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.impls.base import AttentionModule, frozen
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern


@dataclasses.dataclass(frozen=True)
class FullDimWeights:
    """Packed weights of the full-width heads, applied as ``x @ w``.

    ``w_qkv`` (D, 3·h·D) holds [Q heads | K heads | V heads]; ``w_o`` is (h·D, D).
    """

    w_qkv: torch.Tensor
    b_qkv: torch.Tensor | None
    w_o: torch.Tensor
    b_o: torch.Tensor | None


def _head_copies(t: torch.Tensor, heads: int, rotate: bool) -> torch.Tensor:
    """h copies of ``t`` side by side along its last dim; with ``rotate``, copy i rotated left by i·d_k."""
    step = t.shape[-1] // heads if rotate else 0
    return torch.cat([torch.roll(t, shifts=-i * step, dims=-1) for i in range(heads)], dim=-1)


def full_dim_weights(weights: AttentionWeights, heads: int) -> FullDimWeights:
    """The h-times-wider weight set described in the module docstring: Q and V rotate per head, K does not."""
    rotate = {"q": True, "k": False, "v": True}
    w_qkv = torch.cat([_head_copies(getattr(weights, f"w_{p}"), heads, r) for p, r in rotate.items()], dim=1)
    w_o = torch.cat([weights.w_o] * heads, dim=0) / math.sqrt(heads)
    b_qkv = None
    if weights.b_q is not None:
        b_qkv = torch.cat([_head_copies(getattr(weights, f"b_{p}"), heads, r) for p, r in rotate.items()])
    return FullDimWeights(w_qkv, b_qkv, w_o, weights.b_o)


def full_dim_reference(
    weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern
) -> torch.Tensor:
    """float64 reference: explicit loop over the h full-width heads with einsum attention."""
    w = full_dim_weights(weights.to(dtype=torch.float64, device="cpu"), heads)
    x = x.to(dtype=torch.float64, device="cpu")
    d_model = w.w_o.shape[1]
    qkv = x @ w.w_qkv if w.b_qkv is None else x @ w.w_qkv + w.b_qkv
    q, k, v = (t.unflatten(-1, (heads, d_model)) for t in qkv.chunk(3, dim=-1))  # (b, n, h, D)
    scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d_model)
    if pattern.causal:
        scores = scores.masked_fill(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1), float("-inf"))
    out = torch.einsum("bhij,bjhd->bihd", scores.softmax(dim=-1), v).flatten(2)
    return out @ w.w_o if w.b_o is None else out @ w.w_o + w.b_o


@register(
    "full_dim_heads",
    description="ablation: h heads of width d_model each (h× projection weights), packed GEMM + SDPA",
    cost=cost.FULL_DIM_HEADS,
    capabilities=Capabilities(grouped_kv=False, own_head_dim=False),  # every head is d_model wide by design
    reference=full_dim_reference,
)
class FullDimHeadsAttention(AttentionModule):
    """Multi-head attention without the head-dimension reduction."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        packed = full_dim_weights(weights, heads)
        self.w_qkv, self.b_qkv = frozen(packed.w_qkv.t().contiguous()), frozen(packed.b_qkv)
        self.w_out, self.b_out = frozen(packed.w_o.t().contiguous()), frozen(packed.b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = (self.split_heads(t, self.heads) for t in F.linear(x, self.w_qkv, self.b_qkv).chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return F.linear(self.merge_heads(out), self.w_out, self.b_out)
