"""``xformers``: xFormers' ``memory_efficient_attention`` on the packed-QKV layout of ``fused``.

xFormers reads (b, n, heads, d_k), so the heads are a view of the packed QKV GEMM's output. Grouped
K/V heads use its 5-D form (b, n, kv_heads, group, d_k) with K and V expanded (a stride-0 view, no
copy) over the query heads of their group; query head i belongs to K/V head i // group, as in
``repeat_interleave``. Causal masking is ``LowerTriangularMask`` (queries and keys have the same
length here); the kernel skips fully masked blocks.

Optional: without the ``xformers`` package the runner reports ``unsupported: xformers not installed``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, optional_import, register


@register(
    "xformers",
    description="packed QKV GEMM, xFormers memory_efficient_attention on the heads as a view, W_o",
    cost=cost.FUSED,
    capabilities=Capabilities(
        grouped_kv=True, decode=False, train=True, devices=frozenset({"cuda"}), requires=("xformers",)
    ),
)
class XformersAttention(FusedAttention):
    """:class:`FusedAttention`'s projections around xFormers' memory-efficient kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops = optional_import("xformers.ops")
        batch, seq_len, _ = x.shape
        q, k, v = F.linear(x, self.w_qkv, self.b_qkv).split(self.split_sizes, dim=-1)
        group = self.heads // self.kv_heads
        shape = (batch, seq_len, self.kv_heads, group, self.head_dim)
        q = q.view(shape)
        k = k.view(batch, seq_len, self.kv_heads, 1, self.head_dim).expand(shape)
        v = v.view(batch, seq_len, self.kv_heads, 1, self.head_dim).expand(shape)
        if group == 1:  # plain multi-head attention: the 4-D form every xFormers version accepts
            q, k, v = (t.squeeze(3) for t in (q, k, v))
        mask = ops.LowerTriangularMask() if self.causal else None
        out = ops.memory_efficient_attention(q, k, v, attn_bias=mask)
        return F.linear(out.reshape(batch, seq_len, self.d_model), self.w_out, self.b_out)
