"""An mhabench plugin: attention written your way, benchmarked beside the built-ins.

Use it either way:
    mhabench run --plugin docs/examples/my_attention.py            # registers "my_attention" below
    implementations: [naive, "examples/my_attention.py:MyAttention"]  # in a config next to examples/

The class takes ``(weights, heads, causal)``; ``forward(x)`` maps (batch, seq_len, d_model) to the
same shape. Its output is checked against the float64 reference before it is timed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import mhabench


@mhabench.register("my_attention", description="example plugin: einsum projections + SDPA", traffic="fused")
class MyAttention(nn.Module):
    def __init__(self, weights: mhabench.AttentionWeights, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.weights, self.heads, self.causal = weights, heads, causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weights

        def heads_of(t: torch.Tensor) -> torch.Tensor:  # (b, n, D) → (b, h, n, d_k)
            return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)

        q, k, v = (heads_of(F.linear(x, m.t(), b)) for m, b in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v)))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).flatten(2)
        return F.linear(out, w.w_o.t(), w.b_o)
