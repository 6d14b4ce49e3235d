"""``torch.nn.MultiheadAttention`` loaded with the shared weights: what a user would otherwise pick."""

from __future__ import annotations

import torch
from torch import nn

from mhabench import cost
from mhabench.impls.base import AttentionModule, causal_mask
from mhabench.impls.fused import pack_qkv
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights


@register(
    "torch_mha",
    description="torch.nn.MultiheadAttention (batch_first, need_weights=False) on the same weights",
    cost=cost.FUSED,
    capabilities=Capabilities(grouped_kv=False, own_head_dim=False),
    core=True,
)
class TorchMHA(AttentionModule):
    """Wraps ``nn.MultiheadAttention``; its packed ``in_proj`` is our Q/K/V matrices transposed.

    Its heads are always embed_dim / num_heads wide and its out_proj is square, so a scenario's
    ``head_dim`` set apart is an ``unsupported`` row (``own_head_dim=False``).
    """

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = False) -> None:
        super().__init__(weights, heads, causal)
        w = weights.w_q
        self.mha = nn.MultiheadAttention(
            self.d_model, heads, bias=weights.has_bias, batch_first=True, device=w.device, dtype=w.dtype
        )
        w_qkv, b_qkv = pack_qkv(weights)
        with torch.no_grad():
            self.mha.in_proj_weight.copy_(w_qkv)
            self.mha.out_proj.weight.copy_(weights.w_o.t())
            if b_qkv is not None:
                self.mha.in_proj_bias.copy_(b_qkv)
                self.mha.out_proj.bias.copy_(weights.b_o)
        self.mha.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = causal_mask(x.shape[1], x.shape[1], x.device) if self.causal else None
        out, _ = self.mha(x, x, x, need_weights=False, attn_mask=mask, is_causal=self.causal)
        return out
