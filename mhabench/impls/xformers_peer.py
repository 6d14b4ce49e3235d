"""``xformers``: xFormers' ``memory_efficient_attention`` on the packed-QKV layout of ``fused``.

xFormers reads (b, n, heads, d_k), so the heads are a view of the packed QKV GEMM's output. Grouped
K/V heads use its 5-D form (b, n, kv_heads, group, d_k) with K and V expanded (a stride-0 view, no
copy) over the query heads of their group; query head i belongs to K/V head i // group, as in
``repeat_interleave``. Causal masking is ``LowerTriangularMask`` (queries and keys have the same
length here); the kernel skips fully masked blocks.

Windows and documents use xFormers' block-diagonal mask objects (``BlockDiagonalMask.from_seqlens``
over every segment of the flattened rows, ``make_causal``, ``make_local_attention`` for a causal window
of w keys); soft-cap, ALiBi and prefix-LM masks have no such object here: unsupported.

Optional: without the ``xformers`` package the runner reports ``unsupported: xformers not installed``.
"""

from __future__ import annotations

from types import ModuleType

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
        grouped_kv=True,
        decode=False,
        train=True,
        devices=frozenset({"cuda"}),
        requires=("xformers",),
        masks=frozenset({"none", "causal", "sliding_window", "document"}),
        layouts=frozenset({"padded", "packed"}),
    ),
)
class XformersAttention(FusedAttention):
    """:class:`FusedAttention`'s projections around xFormers' memory-efficient kernel."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ops = optional_import("xformers.ops")
        batch, seq_len, _ = x.shape
        sequences = batch if self.pattern.plain else 1  # a block-diagonal mask runs over the flattened rows
        tokens = batch * seq_len // sequences
        q, k, v = F.linear(x, self.w_qkv, self.b_qkv).split(self.split_sizes, dim=-1)
        group = self.heads // self.kv_heads
        shape = (sequences, tokens, self.kv_heads, group, self.head_dim)
        q = q.reshape(shape)
        k = k.reshape(sequences, tokens, self.kv_heads, 1, self.head_dim).expand(shape)
        v = v.reshape(sequences, tokens, self.kv_heads, 1, self.head_dim).expand(shape)
        if group == 1:  # plain multi-head attention: the 4-D form every xFormers version accepts
            q, k, v = (t.squeeze(3) for t in (q, k, v))
        out = ops.memory_efficient_attention(q, k, v, attn_bias=self.attn_bias(ops, batch, seq_len))
        return F.linear(out.reshape(batch, seq_len, -1), self.w_out, self.b_out)

    def attn_bias(self, ops: ModuleType, batch: int, seq_len: int) -> object | None:
        """xFormers' own mask objects (never a dense tensor): ``LowerTriangularMask`` for plain causal; else
        a block-diagonal mask over every segment of the flattened rows, made causal, and local for a window."""
        if self.pattern.plain:
            return ops.LowerTriangularMask() if self.causal else None
        segments = [length for row in self.pattern.rows(batch, seq_len) for length in row]
        mask = ops.fmha.attn_bias.BlockDiagonalMask.from_seqlens(segments)
        if self.causal:
            mask = mask.make_causal()
        if self.pattern.mask == "sliding_window":
            mask = mask.make_local_attention(int(self.pattern.window or 0))
        return mask
