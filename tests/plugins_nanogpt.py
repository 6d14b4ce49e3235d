"""A nanoGPT-style causal self-attention brought in as a plugin, with no cost model declared.

It follows the layout of nanoGPT's ``CausalSelfAttention`` (one packed ``c_attn`` linear for Q, K
and V, heads as a view, a ``flash`` switch between ``F.scaled_dot_product_attention`` and a manual
path that writes the n×n scores, dropout, ``c_proj``), written here in our own words and fed from
an ``mhabench.AttentionWeights``. A config names it as ``tests/plugins_nanogpt.py:CausalSelfAttention``
or ``…:ManualCausalSelfAttention``. tests/test_counters.py uses it to show that the counted
intensity follows what a module does: the manual path lands near ``naive``, the flash path near
``fused``, although neither says which it is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mhabench import AttentionWeights


class CausalSelfAttention(nn.Module):
    """Packed QKV projection, SDPA (``flash``) or explicit softmax attention, output projection."""

    flash = True

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = True) -> None:
        super().__init__()
        if weights.kv_dim != weights.d_model:
            raise ValueError("CausalSelfAttention has one K/V head per query head (no grouped K/V)")
        self.n_head, self.n_embd, self.causal = heads, weights.d_model, causal
        self.dropout = 0.0  # nanoGPT's default for fine-tuning; dropout is identity at p = 0
        self.c_attn = _linear(torch.cat([weights.w_q, weights.w_k, weights.w_v], dim=1), _packed_bias(weights))
        self.c_proj = _linear(weights.w_o, weights.b_o)
        self.attn_dropout = nn.Dropout(self.dropout)
        self.resid_dropout = nn.Dropout(self.dropout)
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = x.shape
        q, k, v = (
            part.view(batch, seq_len, self.n_head, width // self.n_head).transpose(1, 2)
            for part in self.c_attn(x).split(self.n_embd, dim=2)
        )
        if self.flash:
            dropout_p = self.dropout if self.training else 0.0
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=self.causal)
        else:
            y = self.manual_attention(q, k, v)
        y = y.transpose(1, 2).contiguous().view(batch, seq_len, width)
        return self.resid_dropout(self.c_proj(y))

    def manual_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Scores written out in full: scale, mask, softmax, dropout, then P·V."""
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if self.causal:
            seq_len = q.size(-2)
            future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        return self.attn_dropout(F.softmax(scores, dim=-1)) @ v


class ManualCausalSelfAttention(CausalSelfAttention):
    """The same module with its flash switch off, as nanoGPT runs on a torch without SDPA."""

    flash = False


def _linear(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Linear:
    """An ``nn.Linear`` computing ``x @ weight + bias`` (it stores the transpose)."""
    layer = nn.Linear(*weight.shape, bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight.t())
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def _packed_bias(weights: AttentionWeights) -> torch.Tensor | None:
    return None if weights.b_q is None else torch.cat([weights.b_q, weights.b_k, weights.b_v])
