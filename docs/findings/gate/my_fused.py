"""The A/A and A/B plugin of docs/findings/gate.md: ``fused`` (packed QKV GEMM, SDPA, W_o) under the name my_fused.

``EXTRA_ROWS`` (a fraction of the sequence length n) adds one extra product: the scores q·kᵀ of the first
``EXTRA_ROWS × n`` query rows of every head again, summed into the output times zero (the output and its check are
unchanged), a regression of a chosen size in known extra work. The harness writes copies with ``EXTRA_ROWS`` set;
this file, at 0, is the base.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import mhabench

EXTRA_ROWS = 0.0


def frozen(t: torch.Tensor | None) -> nn.Parameter | None:
    return None if t is None else nn.Parameter(t, requires_grad=False)


@mhabench.register("my_fused", description="fused, as a plugin (docs/findings/gate.md)", cost=mhabench.cost.FUSED)
class MyFused(nn.Module):
    def __init__(self, weights: mhabench.AttentionWeights, heads: int, pattern: mhabench.pattern.AttentionPattern):
        super().__init__()
        self.heads, self.causal = heads, pattern.causal
        w = weights
        self.w_qkv = frozen(torch.cat([w.w_q, w.w_k, w.w_v], dim=1))
        self.b_qkv = None if w.b_q is None else frozen(torch.cat([w.b_q, w.b_k, w.b_v]))
        self.w_o, self.b_o = frozen(w.w_o), frozen(w.b_o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = F.linear(x, self.w_qkv.t(), self.b_qkv)
        q, k, v = (t.unflatten(-1, (self.heads, -1)).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).flatten(2)
        rows = round(EXTRA_ROWS * q.shape[-2])
        if rows:
            out = out + (q[..., :rows, :] @ k.transpose(-2, -1)).sum() * 0
        return F.linear(out, self.w_o.t(), self.b_o)
