"""``flash_attn``: the FlashAttention-2 package's kernel on the packed-QKV layout of ``fused``.

The packed QKV GEMM writes (b, n, 3·D) and FlashAttention reads (b, n, heads, d_k): the heads are a
view of the GEMM's output, no transpose and no copy (``fused`` hands SDPA (b, h, n, d_k) views and
merges the heads back with a copy). Multi-head attention uses ``flash_attn_qkvpacked_func`` on the
packed tensor itself; grouped K/V heads use ``flash_attn_func``, which broadcasts them natively.
Causal masks are bottom-right aligned in flash-attn ≥ 2.1, like :func:`mhabench.impls.base.causal_mask`,
and the kernel skips fully masked blocks.

Patterns use the kernel's own arguments, never a dense mask: a causal window of w keys is
``window_size=(w − 1, 0)``, ``softcap`` and ``alibi_slopes`` (flash-attn ≥ 2.6 for soft-cap), and
documents (packed, or padded rows whose padding is a segment of its own) run through
``flash_attn_varlen_func`` with ``cu_seqlens``. A prefix-LM mask has no such argument: unsupported.

Optional: without the ``flash_attn`` package the runner reports ``unsupported: flash_attn not
installed`` (``pip install mhabench[gpu]`` on a CUDA machine with a matching wheel).
"""

from __future__ import annotations

import itertools
from types import ModuleType

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, optional_import, register
from mhabench.pattern import alibi_slopes

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
        max_head_dim=MAX_HEAD_DIM,
        masks=frozenset({"none", "causal", "sliding_window", "document"}),
        score_mods=frozenset({"none", "softcap", "alibi"}),
        layouts=frozenset({"padded", "packed"}),
    ),
)
class FlashAttnAttention(FusedAttention):
    """:class:`FusedAttention`'s projections around ``flash_attn``'s kernel in its native layout."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.head_dim > MAX_HEAD_DIM:  # the runner screens this out first; the Python API gets it here
            raise UnsupportedError(
                f"flash_attn: head_dim {self.head_dim} > {MAX_HEAD_DIM} has no kernel", ReasonCode.HEAD_DIM_TOO_WIDE
            )
        flash = optional_import("flash_attn")
        batch, seq_len, _ = x.shape
        qkv = F.linear(x, self.w_qkv, self.b_qkv)
        options = self.kernel_options(x.device)
        if self.pattern.lengths is not None:
            out = self.varlen(flash, qkv, options)
        elif self.kv_heads == self.heads:
            packed = qkv.view(batch, seq_len, 3, self.heads, self.head_dim)
            out = flash.flash_attn_qkvpacked_func(packed, causal=self.causal, **options)
        else:
            q, k, v = qkv.split(self.split_sizes, dim=-1)
            out = flash.flash_attn_func(
                q.view(batch, seq_len, self.heads, self.head_dim),
                k.view(batch, seq_len, self.kv_heads, self.head_dim),
                v.view(batch, seq_len, self.kv_heads, self.head_dim),
                causal=self.causal,
                **options,
            )
        return F.linear(out.reshape(batch, seq_len, -1), self.w_out, self.b_out)

    def kernel_options(self, device: torch.device) -> dict[str, object]:
        """The pattern as flash-attn's own arguments, passed only when used (older versions lack some):
        a causal window of w keys is ``window_size=(w − 1, 0)``; ``softcap``; ALiBi's per-head slopes."""
        options: dict[str, object] = {}
        if self.pattern.mask == "sliding_window":
            options["window_size"] = (int(self.pattern.window or 0) - 1, 0)
        if self.pattern.score_mod == "softcap":
            options["softcap"] = float(self.pattern.softcap or 0)
        if self.pattern.score_mod == "alibi":
            options["alibi_slopes"] = alibi_slopes(self.heads).to(device=device, dtype=torch.float32)
        return options

    def varlen(self, flash: ModuleType, qkv: torch.Tensor, options: dict[str, object]) -> torch.Tensor:
        """Documents through ``flash_attn_varlen_func``: every segment of every row (documents, and a padded
        row's padding) is one sequence of the flattened tokens, delimited by ``cu_seqlens``."""
        rows, tokens, _ = qkv.shape
        segments = [length for row in self.pattern.rows(rows, tokens) for length in row]
        cu_seqlens = torch.tensor([0, *itertools.accumulate(segments)], dtype=torch.int32, device=qkv.device)
        q, k, v = qkv.flatten(0, 1).split(self.split_sizes, dim=-1)
        return flash.flash_attn_varlen_func(
            q.view(-1, self.heads, self.head_dim),
            k.view(-1, self.kv_heads, self.head_dim),
            v.view(-1, self.kv_heads, self.head_dim),
            cu_seqlens,
            cu_seqlens,
            max(segments),
            max(segments),
            causal=self.causal,
            **options,
        )
