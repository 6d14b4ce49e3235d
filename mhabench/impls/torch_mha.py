"""``torch.nn.MultiheadAttention`` loaded with the shared weights: what a user would otherwise pick, and two
variants that isolate why it can be slow (docs/findings/torch-mha.md).

- ``torch_mha``: ``batch_first=True``, our weights as they are (no biases by default). That misses the module's
  native fast path (``torch._native_multi_head_attention`` is called only when ``in_proj_bias`` exists), so it
  runs ``F.multi_head_attention_forward`` on its input transposed to (n, b, d): ``F.linear`` cannot fold that view
  and its QKV projection runs as one batched GEMM per token.
- ``torch_mha_seq_first``: ``batch_first=False`` on an input a user holds as (n, b, d) (made contiguous once per
  call here: that copy is the variant's layout stage).
- ``torch_mha_fast``: ``batch_first=True`` with zero biases, so every condition of the fast path that its
  forward lists holds in eval mode without grad (the runner's ``inference_mode``): the same function, since
  the biases add zero.
"""

from __future__ import annotations

import torch
from torch import nn

from mhabench import cost
from mhabench.impls.base import AttentionModule, causal_mask
from mhabench.impls.fused import pack_qkv
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern

CAPABILITIES = Capabilities(grouped_kv=False, own_head_dim=False)


class _MultiheadAttention(AttentionModule):
    """Wraps ``nn.MultiheadAttention``; its packed ``in_proj`` is our Q/K/V matrices transposed.

    Its heads are always embed_dim / num_heads wide and its out_proj is square, so a scenario's
    ``head_dim`` set apart is an ``unsupported`` row (``own_head_dim=False``).
    """

    batch_first = True
    zero_bias = False
    """Give the module zero biases where our weights have none (the fast path needs them)."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        w = weights.w_q
        bias = weights.has_bias or self.zero_bias
        self.mha = nn.MultiheadAttention(
            self.d_model, heads, bias=bias, batch_first=self.batch_first, device=w.device, dtype=w.dtype
        )
        w_qkv, b_qkv = pack_qkv(weights)
        with torch.no_grad():
            self.mha.in_proj_weight.copy_(w_qkv)
            self.mha.out_proj.weight.copy_(weights.w_o.t())
            if b_qkv is not None:
                self.mha.in_proj_bias.copy_(b_qkv)
                self.mha.out_proj.bias.copy_(weights.b_o)
            elif bias:
                self.mha.in_proj_bias.zero_()
                self.mha.out_proj.bias.zero_()
        self.mha.requires_grad_(False)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = causal_mask(x.shape[1], x.shape[1], x.device) if self.causal else None
        out, _ = self.mha(x, x, x, need_weights=False, attn_mask=mask, is_causal=self.causal)
        return out


@register(
    "torch_mha",
    description="torch.nn.MultiheadAttention (batch_first, need_weights=False) on the same weights",
    cost=cost.FUSED,
    capabilities=CAPABILITIES,
    core=True,
)
class TorchMHA(_MultiheadAttention):
    """As a user builds it: ``batch_first=True`` and our weights' biases (none by default)."""


@register(
    "torch_mha_seq_first",
    description="torch.nn.MultiheadAttention with batch_first=False, on an input held as (n, b, d)",
    cost=cost.FUSED,
    capabilities=CAPABILITIES,
)
class TorchMHASeqFirst(_MultiheadAttention):
    """``batch_first=False``: the input made (n, b, d) contiguous once per call, the output viewed back."""

    batch_first = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sequence_first = x.transpose(0, 1).contiguous()
        mask = causal_mask(x.shape[1], x.shape[1], x.device) if self.causal else None
        out, _ = self.mha(
            sequence_first, sequence_first, sequence_first, need_weights=False, attn_mask=mask, is_causal=self.causal
        )
        return out.transpose(0, 1)


@register(
    "torch_mha_fast",
    description="torch.nn.MultiheadAttention on its native fast path (zero biases, eval, no grad)",
    cost=cost.FUSED,
    capabilities=Capabilities(grouped_kv=False, own_head_dim=False, train=False),
)
class TorchMHAFast(_MultiheadAttention):
    """``batch_first=True`` with zero biases, so ``torch._native_multi_head_attention`` runs."""

    zero_bias = True
