"""An mhabench plugin: attention written your way, benchmarked beside the built-ins.

Use it either way:
    mhabench run --plugin docs/examples/my_attention.py            # registers "my_attention" below
    implementations: [naive, "examples/my_attention.py:MyAttention"]  # in a config next to examples/

The class takes ``(weights, heads, pattern)``: ``pattern`` is an ``mhabench.pattern.AttentionPattern`` (its
capabilities below declare none and causal only, so ``pattern.causal`` says all there is); ``forward(x)`` maps
(batch, seq_len, d_model) to the same shape. Its output is checked against the float64 reference before it is timed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import mhabench


def frozen(t: torch.Tensor | None) -> nn.Parameter | None:
    """Weights as frozen parameters: the parameter count comes from the module; mode: train turns grad on."""
    return None if t is None else nn.Parameter(t, requires_grad=False)


@mhabench.register(
    "my_attention",
    description="example plugin: einsum projections + SDPA",
    cost=mhabench.cost.FUSED,  # the model that prices it; None leaves the modelled columns empty
    capabilities=mhabench.Capabilities(grouped_kv=False),  # what it cannot run becomes an 'unsupported' row
)
class MyAttention(nn.Module):
    def __init__(
        self, weights: mhabench.AttentionWeights, heads: int, pattern: mhabench.pattern.AttentionPattern
    ) -> None:
        super().__init__()
        self.heads, self.causal = heads, pattern.causal
        w = weights
        self.w_q, self.w_k, self.w_v, self.w_o = (frozen(t) for t in (w.w_q, w.w_k, w.w_v, w.w_o))
        self.b_q, self.b_k, self.b_v, self.b_o = (frozen(t) for t in (w.b_q, w.b_k, w.b_v, w.b_o))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def heads_of(t: torch.Tensor) -> torch.Tensor:  # (b, n, D) → (b, h, n, d_k)
            return t.unflatten(-1, (self.heads, -1)).transpose(1, 2)

        projections = ((self.w_q, self.b_q), (self.w_k, self.b_k), (self.w_v, self.b_v))
        q, k, v = (heads_of(F.linear(x, m.t(), b)) for m, b in projections)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).flatten(2)
        return F.linear(out, self.w_o.t(), self.b_o)
