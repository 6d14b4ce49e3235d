"""Shape bookkeeping and the textbook attention math that several implementations share."""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

from mhabench.errors import ConfigError
from mhabench.impls.masking import DenseMask, MaskCache
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import AttentionPattern, as_pattern


def head_layout(weights: AttentionWeights, heads: int) -> tuple[int, int]:
    """Return ``(head_dim, kv_heads)`` for ``weights`` split into ``heads`` query heads.

    The head size comes from the query width (``w_q``'s columns), not from d_model, so a model whose
    ``head_dim`` is set apart (Gemma 2: d_model 3584, 16 heads of 256) needs no extra argument.
    """
    q_dim = weights.q_dim
    if heads < 1 or q_dim % heads:
        raise ConfigError(f"heads: query width {q_dim} is not divisible by heads {heads}")
    head_dim = q_dim // heads
    kv_heads, remainder = divmod(weights.kv_dim, head_dim)
    if remainder or kv_heads < 1 or heads % kv_heads:
        raise ConfigError(
            f"kv_heads: key/value width {weights.kv_dim} is not a divisor group of {heads} heads of size {head_dim}"
        )
    return head_dim, kv_heads


def frozen(tensor: torch.Tensor | None) -> nn.Parameter | None:
    """A weight the module owns but does not train by default (``mode: train`` turns grad on)."""
    return None if tensor is None else nn.Parameter(tensor, requires_grad=False)


class AttentionModule(nn.Module):
    """Base for every implementation: holds the head layout and the split/merge reshapes.

    Weights are frozen ``nn.Parameter``s, so ``parameters()`` is the module's weight set: its
    parameter count, and what ``mode: train`` differentiates.
    """

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern) -> None:
        super().__init__()
        self.head_dim, self.kv_heads = head_layout(weights, heads)
        self.heads = heads
        self.d_model = weights.d_model
        self.pattern = as_pattern(pattern)  # a bool from a plugin's subclass still works, deprecated
        self.causal = self.pattern.causal
        self.mask_cache = MaskCache(self.pattern, heads)

    def dense_mask(self, q: torch.Tensor, kv_len: int) -> DenseMask | None:
        """The mask tensors for queries ``q`` (b, [h,] n, d_k) against ``kv_len`` keys; None for a plain
        pattern (``causal`` says all there is)."""
        if self.pattern.plain:
            return None
        return self.mask_cache.get(q.shape[0], q.shape[-2], kv_len, q)

    def prepare_masks(self, rows: int, q_len: int, kv_len: int, like: torch.Tensor) -> None:
        """Build the masks of calls of this shape now, before the checked and timed calls: a model builds
        its mask once per batch, outside any one layer's time (:mod:`mhabench.run.steps` calls this)."""
        if not self.pattern.plain:
            self.mask_cache.get(rows, q_len, kv_len, like)

    def window(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A decode step's keys and values (b, kv, L, d_k): the last ``window`` of them under a sliding window."""
        if self.pattern.mask != "sliding_window" or self.pattern.window is None:
            return k, v
        return k[:, :, -self.pattern.window :], v[:, :, -self.pattern.window :]

    def hold(self, weights: AttentionWeights) -> None:
        """Keep the four projections as they are: ``w_q``/``w_k``/``w_v``/``w_o`` and their biases."""
        for field in dataclasses.fields(weights):
            setattr(self, field.name, frozen(getattr(weights, field.name)))

    @staticmethod
    def split_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
        """(b, n, n_heads·d_k) → (b, n_heads, n, d_k), a view."""
        batch, seq_len, width = t.shape
        return t.view(batch, seq_len, n_heads, width // n_heads).transpose(1, 2)

    @staticmethod
    def merge_heads(t: torch.Tensor) -> torch.Tensor:
        """(b, h, n, d_k) → (b, n, h·d_k); copies, as every real implementation must."""
        batch, heads, seq_len, head_dim = t.shape
        return t.transpose(1, 2).reshape(batch, seq_len, heads * head_dim)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``x @ w + b`` in one fused GEMM when there is a bias."""
    return x @ w if b is None else torch.addmm(b, x.flatten(0, -2), w).view(*x.shape[:-1], -1)


def causal_mask(q_len: int, kv_len: int, device: torch.device) -> torch.Tensor:
    """Boolean mask, True where query i may *not* see key j (keys after it, end-aligned)."""
    offset = kv_len - q_len
    return torch.ones(q_len, kv_len, dtype=torch.bool, device=device).triu(offset + 1)


def attention_probabilities(
    q: torch.Tensor, k: torch.Tensor, causal: bool, scaled: bool = True, mask: DenseMask | None = None
) -> torch.Tensor:
    """softmax(QKᵀ/√d_k + mask), materialized: (…, n, d_k) × (…, L, d_k) → (…, n, L).

    ``scaled=False`` leaves out the 1/√d_k pass entirely (the ``unscaled`` ablation). ``mask``: the
    dense tensors of a pattern beyond plain causal (then ``causal`` is not looked at).
    """
    scores = q @ k.transpose(-2, -1)
    if scaled:
        scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = mask.apply(scores)
    elif causal:
        scores = scores.masked_fill(causal_mask(q.shape[-2], k.shape[-2], q.device), float("-inf"))
    return scores.softmax(dim=-1)


def materialized_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    scaled: bool = True,
    mask: DenseMask | None = None,
) -> torch.Tensor:
    """The annotated-transformer attention: the full n×L score matrix exists in memory.

    ``q`` is (…, n, d_k); ``k``/``v`` are (…, L, d_k) with the same leading dims.
    """
    return attention_probabilities(q, k, causal, scaled, mask) @ v


def repeat_kv(t: torch.Tensor, groups: int) -> torch.Tensor:
    """(b, kv_heads, L, d_k) → (b, kv_heads·groups, L, d_k) so each query head has its K/V."""
    return t if groups == 1 else t.repeat_interleave(groups, dim=1)
