"""Dense masks and score biases for the paths that take them as tensors: materialized attention and SDPA.

The semantics live in :mod:`mhabench.pattern`; this module only lays a pattern out as the tensors a
dense attention call reads. A model builds its mask once per batch and every layer reuses it, so an
implementation builds these once per input shape (:class:`MaskCache`), outside the call it times.
"""

from __future__ import annotations

import dataclasses

import torch

from mhabench.pattern import AttentionPattern, TokenTable, allowed, score_bias, softcapped


@dataclasses.dataclass(frozen=True)
class DenseMask:
    """What a dense attention applies to its scaled scores, in this order: softcap, bias, mask.

    ``visible`` is boolean (rows | 1, 1, n, L), True where a query may see a key; ``bias`` the ALiBi
    bias (rows | 1, h, n, L) in the scores' dtype. Either may be None (nothing to apply).
    """

    visible: torch.Tensor | None
    bias: torch.Tensor | None
    softcap: float | None
    additive: torch.Tensor | None = None
    """The bias with −inf where hidden, built once beside them for SDPA (None unless there are both)."""

    def __post_init__(self) -> None:
        if self.bias is not None and self.visible is not None and self.additive is None:
            object.__setattr__(self, "additive", self.bias.masked_fill(~self.visible, float("-inf")))

    def apply(self, scores: torch.Tensor) -> torch.Tensor:
        """Scores (…, n, L) with the cap, the bias and the mask applied (new tensors, never in place)."""
        if self.softcap is not None:
            scores = softcapped(scores, self.softcap)
        if self.bias is not None:
            scores = scores + self.bias
        if self.visible is not None:
            scores = scores.masked_fill(~self.visible, float("-inf"))
        return scores

    def head(self, index: int) -> DenseMask:
        """What one query head's (b, n, L) scores read in a per-head loop: the mask and its bias, no head axis."""
        visible = None if self.visible is None else self.visible[:, 0]
        bias = None if self.bias is None else self.bias[:, index]
        additive = None if self.additive is None else self.additive[:, index]
        return DenseMask(visible, bias, self.softcap, additive)

    def sdpa_mask(self) -> torch.Tensor | None:
        """SDPA's ``attn_mask``: the booleans, or with a bias one additive float mask (−inf where hidden)."""
        if self.bias is None:
            return self.visible
        return self.bias if self.visible is None else self.additive


def dense_mask(
    pattern: AttentionPattern, rows: int, q_len: int, kv_len: int, heads: int, dtype: torch.dtype, device: torch.device
) -> DenseMask:
    """The tensors of ``pattern`` for ``rows`` input rows of ``q_len`` queries against ``kv_len`` keys.

    Prefill (q_len == kv_len): a mask unless every query sees every key of its row (``none`` without
    documents); one row stands for all when the rows do not differ. A decode step (one query against
    the cache, already cut to a window's keys) sees every key it is given: no mask, only the bias of
    the last position.
    """
    if q_len < kv_len:
        table = TokenTable.of([[kv_len]], device)
        queries = torch.tensor([kv_len - 1], device=device)
        return DenseMask(None, _bias(pattern, table, heads, queries, dtype), pattern.softcap)
    distinct = rows if pattern.lengths is not None else 1
    table = TokenTable.of(pattern.rows(distinct, q_len), device)
    visible = allowed(pattern, table)[:, None] if pattern.needs_mask else None
    return DenseMask(visible, _bias(pattern, table, heads, None, dtype), pattern.softcap)


def _bias(
    pattern: AttentionPattern, table: TokenTable, heads: int, queries: torch.Tensor | None, dtype: torch.dtype
) -> torch.Tensor | None:
    bias = score_bias(pattern, table, heads, queries)
    return None if bias is None else bias.to(dtype)


class MaskCache:
    """Dense masks built once per (rows, q_len, kv_len, device, dtype) and reused, as a model reuses its
    mask across layers and steps."""

    def __init__(self, pattern: AttentionPattern, heads: int) -> None:
        self.pattern = pattern
        self.heads = heads
        self.masks: dict[tuple[object, ...], DenseMask] = {}

    def get(self, rows: int, q_len: int, kv_len: int, like: torch.Tensor) -> DenseMask:
        key = (rows, q_len, kv_len, like.device, like.dtype)
        if key not in self.masks:
            self.masks[key] = dense_mask(self.pattern, rows, q_len, kv_len, self.heads, like.dtype, like.device)
        return self.masks[key]
