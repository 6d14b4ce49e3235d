"""nanoGPT-style attention: one packed QKV GEMM, heads as a view, ``scaled_dot_product_attention``."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.impls.base import AttentionModule, frozen
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import EVERY_PATTERN, Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern


def pack_qkv(weights: AttentionWeights) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The (q_dim + 2·kv_dim, d_model) packed weight in ``F.linear`` layout, and its bias."""
    w_qkv = torch.cat([weights.w_q, weights.w_k, weights.w_v], dim=1).t().contiguous()
    if weights.b_q is None:
        return w_qkv, None
    return w_qkv, torch.cat([weights.b_q, weights.b_k, weights.b_v])


SDPA_PATTERNS = {**EVERY_PATTERN, "score_mods": frozenset({"none", "alibi"})}
"""What SDPA takes: every mask and ALiBi as a dense ``attn_mask`` (no soft-cap: SDPA has no score hook)."""


@register(
    "fused",
    description="one packed QKV GEMM, view to heads, F.scaled_dot_product_attention (fastest backend), W_o",
    cost=cost.FUSED_DENSE_MASK,
    capabilities=Capabilities(decode=True, **SDPA_PATTERNS),
    core=True,
)
class FusedAttention(AttentionModule):
    """The production layout: 3 projections in one GEMM and a fused (flash) attention kernel.

    SDPA picks its backend; the runner records which one ran. Grouped-query K/V heads go
    through SDPA's ``enable_gqa``.
    """

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        w_qkv, b_qkv = pack_qkv(weights)
        self.w_qkv, self.b_qkv = frozen(w_qkv), frozen(b_qkv)
        self.w_out, self.b_out = frozen(weights.w_o.t().contiguous()), frozen(weights.b_o)
        self.split_sizes = [weights.q_dim, weights.kv_dim, weights.kv_dim]

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The packed QKV GEMM, split into heads: q (b, h, n, d_k), k and v (b, kv_heads, n, d_k)."""
        q, k, v = F.linear(x, self.w_qkv, self.b_qkv).split(self.split_sizes, dim=-1)
        return self.split_heads(q, self.heads), self.split_heads(k, self.kv_heads), self.split_heads(v, self.kv_heads)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        """The attention kernel alone, (b, h, n, d_k) → (b, h, n, d_k): what the SDPA and flex peers replace.

        A plain pattern is ``is_causal``; any other is a dense ``attn_mask`` (booleans, or a float bias
        with ALiBi), which some backends refuse: the row's ``sdpa_backend`` says which one ran.
        """
        gqa = self.kv_heads != self.heads
        mask = self.dense_mask(q, k.shape[-2])
        if mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.sdpa_mask(), enable_gqa=gqa)

    def output(self, heads_out: torch.Tensor) -> torch.Tensor:
        """Merge the heads and apply W_o."""
        return F.linear(self.merge_heads(heads_out), self.w_out, self.b_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.attend(*self.project(x), self.causal))

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``x`` (fills the decode cache)."""
        _, k, v = self.project(x)
        return k, v

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One new token per sequence (b, 1, D): one packed GEMM, SDPA over the cache views, W_o."""
        q, k, v = self.project(x)
        return self.output(self.attend(q, *self.window(*cache.append(k, v)), causal=False))
