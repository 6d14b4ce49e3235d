"""``flash_attn``: the FlashAttention-2 package's kernel on the packed-QKV layout of ``fused``.

The packed QKV GEMM writes (b, n, 3·D) and FlashAttention reads (b, n, heads, d_k): the heads are a
view of the GEMM's output, no transpose and no copy (``fused`` hands SDPA (b, h, n, d_k) views and
merges the heads back with a copy). Multi-head attention uses ``flash_attn_qkvpacked_func`` on the
packed tensor itself; grouped K/V heads use ``flash_attn_func``, which broadcasts them natively.
Causal masks are bottom-right aligned in flash-attn ≥ 2.1, like :func:`mhabench.impls.base.causal_mask`,
and the kernel skips fully masked blocks.

Optional: without the ``flash_attn`` package the runner reports ``unsupported: flash_attn not
installed`` (``pip install mhabench[gpu]`` on a CUDA machine with a matching wheel).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.errors import UnsupportedError
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, optional_import, register

MAX_HEAD_DIM = 256  # FlashAttention-2's largest supported head dimension


@register(
    "flash_attn",
    description="packed QKV GEMM, FlashAttention-2 (flash_attn package) on the heads as a view, W_o",
    cost=cost.FUSED,
    capabilities=Capabilities(
        grouped_kv=True,
        decode=False,
        train=True,
        devices=frozenset({"cuda"}),
        dtypes=frozenset({"float16", "bfloat16"}),
        requires=("flash_attn",),
    ),
)
class FlashAttnAttention(FusedAttention):
    """:class:`FusedAttention`'s projections around ``flash_attn``'s kernel in its native layout."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.head_dim > MAX_HEAD_DIM:
            raise UnsupportedError(f"flash_attn: head_dim {self.head_dim} > {MAX_HEAD_DIM} has no kernel")
        flash = optional_import("flash_attn")
        batch, seq_len, _ = x.shape
        qkv = F.linear(x, self.w_qkv, self.b_qkv)
        if self.kv_heads == self.heads:
            packed = qkv.view(batch, seq_len, 3, self.heads, self.head_dim)
            out = flash.flash_attn_qkvpacked_func(packed, causal=self.causal)
        else:
            q, k, v = qkv.split(self.split_sizes, dim=-1)
            out = flash.flash_attn_func(
                q.view(batch, seq_len, self.heads, self.head_dim),
                k.view(batch, seq_len, self.kv_heads, self.head_dim),
                v.view(batch, seq_len, self.kv_heads, self.head_dim),
                causal=self.causal,
            )
        return F.linear(out.reshape(batch, seq_len, self.d_model), self.w_out, self.b_out)
