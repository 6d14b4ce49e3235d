"""Which keys each query may see, and how its scores are modified: the attention pattern of a case.

One place defines the semantics that the float64 reference, every implementation and the cost model
share, so a mask means the same thing everywhere:

- A batch row is a run of **segments**. Without ``lengths`` a row is one segment of ``seq_len``
  tokens. With ``lengths`` every length is a document: ``layout: padded`` gives each document its own
  row of ``seq_len`` tokens, the rest of the row a padding segment; ``layout: packed`` concatenates
  the documents into one row. A query sees keys of its own segment only (block-diagonal), so padding
  never reaches a real token and a padding query is never fully masked (it sees its own segment).
- Within a segment, positions count from 0 and the ``mask`` rule decides: ``none`` every key,
  ``causal``/``document`` keys j ≤ i, ``sliding_window`` the ``window`` keys i − w + 1 … i (causal,
  Mistral/Gemma style; two-sided windows are not supported), ``prefix_lm`` keys j < ``prefix`` or j ≤ i.
- ``score_mod`` acts on the scaled scores before the mask: ``softcap`` maps s → cap·tanh(s / cap)
  (Gemma 2), ``alibi`` adds −slope_h·|i − j| with the standard per-head slopes (BLOOM, MPT).

A decode step is the last query of a single-segment row: it sees what the rule allows the last
position to see (a window: the last ``window`` cached keys).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Literal

import torch

MaskName = Literal["none", "causal", "sliding_window", "prefix_lm", "document"]
ScoreModName = Literal["none", "softcap", "alibi"]
Layout = Literal["padded", "packed"]
CAUSAL_MASKS = frozenset({"causal", "sliding_window", "document"})
"""Masks under which no query sees a later key of its segment."""
PLAIN_MASKS = frozenset({"none", "causal"})


@dataclasses.dataclass(frozen=True)
class AttentionPattern:
    """The mask, the documents of a batch and the score modifier of one case (see the module doc)."""

    mask: MaskName = "none"
    window: int | None = None
    prefix: int | None = None
    lengths: tuple[int, ...] | None = None
    """Document lengths (one per document); None: every row is one full-length sequence."""
    layout: Layout = "padded"
    score_mod: ScoreModName = "none"
    softcap: float | None = None

    @property
    def causal(self) -> bool:
        """No query sees a later key of its segment."""
        return self.mask in CAUSAL_MASKS

    @property
    def plain(self) -> bool:
        """None or causal over equal-length rows, no modifier: what every implementation can run."""
        return self.mask in PLAIN_MASKS and self.lengths is None and self.score_mod == "none"

    @property
    def needs_mask(self) -> bool:
        """Some query does not see some key of its row: every mask but ``none`` over full-length rows."""
        return self.mask != "none" or self.lengths is not None

    @property
    def packed(self) -> bool:
        return self.lengths is not None and self.layout == "packed"

    def rows(self, batch: int, seq_len: int) -> list[list[int]]:
        """The segment lengths of every input row (a padding segment last where a document is short)."""
        if self.lengths is None:
            return [[seq_len]] * batch
        if self.layout == "packed":
            return [list(self.lengths)]
        return [[length, seq_len - length] if length < seq_len else [length] for length in self.lengths]

    def input_shape(self, batch: int, seq_len: int) -> tuple[int, int]:
        """(rows, tokens per row) of the input tensor."""
        if self.packed:
            assert self.lengths is not None
            return 1, sum(self.lengths)
        return (batch if self.lengths is None else len(self.lengths)), seq_len

    def real_segments(self, batch: int, seq_len: int) -> list[int]:
        """Lengths of the segments that hold real tokens (padding excluded), over the whole batch."""
        if self.lengths is None:
            return [seq_len] * batch
        return list(self.lengths)

    def real_tokens_per_row(self, batch: int, seq_len: int) -> list[int]:
        """Real (non-padding) tokens of every input row."""
        if self.lengths is None or self.layout == "packed":
            return [sum(row) for row in self.rows(batch, seq_len)]
        return list(self.lengths)

    def last_query_keys(self, segment: int) -> int:
        """Keys the last query of a ``segment``-token segment sees: a decode step's keys."""
        if self.mask == "sliding_window":
            return min(segment, self.window or segment)
        return segment

    def visible_pairs(self, segment: int) -> int:
        """(query, key) pairs the rule allows within one segment of ``segment`` tokens (closed form)."""
        n = segment
        if self.mask == "none":
            return n * n
        if self.mask == "sliding_window":
            w = min(self.window or n, n)
            return w * (w + 1) // 2 + (n - w) * w
        if self.mask == "prefix_lm":
            p = min(self.prefix or 0, n)
            return p * p + n * (n + 1) // 2 - p * (p + 1) // 2
        return n * (n + 1) // 2


PLAIN = AttentionPattern()
CAUSAL = AttentionPattern(mask="causal")


BOOL_CAUSAL_DEPRECATED = (
    "causal=True/False is deprecated: pass an mhabench.pattern.AttentionPattern "
    "(mhabench.pattern.CAUSAL or mhabench.pattern.PLAIN for plain attention)"
)
_SAID: set[str] = set()
"""The deprecations already said in this process: each is said once, not once per layer built."""


def say_once(message: str, stacklevel: int = 3) -> None:
    """A ``DeprecationWarning`` the first time ``message`` comes up in this process."""
    if message not in _SAID:
        _SAID.add(message)
        warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)


def as_pattern(causal: bool | AttentionPattern) -> AttentionPattern:
    """The plugin boundary's one conversion: a pattern as it is, the old bool ``causal`` as its plain pattern.

    Inside mhabench every layer gets an :class:`AttentionPattern`; a bool still comes in from code written before
    patterns (a plugin calling ``mhabench.build(..., causal=True)`` or building a built-in layer with a bool), so it
    keeps working and is deprecated, said once.
    """
    if isinstance(causal, AttentionPattern):
        return causal
    say_once(BOOL_CAUSAL_DEPRECATED, stacklevel=4)  # the caller of build() or of the layer
    return CAUSAL if causal else PLAIN


# --- tensors ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TokenTable:
    """Per input row and token: the segment it belongs to and its position within it, (rows, tokens)."""

    segment: torch.Tensor
    position: torch.Tensor

    @classmethod
    def of(cls, rows: list[list[int]], device: torch.device | str) -> TokenTable:
        segments, positions = [], []
        for lengths in rows:
            sizes = torch.tensor(lengths)
            segments.append(torch.repeat_interleave(torch.arange(len(lengths)), sizes))
            starts = torch.repeat_interleave(torch.cumsum(sizes, 0) - sizes, sizes)
            positions.append(torch.arange(int(sizes.sum())) - starts)
        return cls(torch.stack(segments).to(device), torch.stack(positions).to(device))


def visible(pattern: AttentionPattern, same: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """The mask rule on tensors: may a query at position ``i`` see a key at ``j`` (``same``: of its segment)?

    The one statement of the rule: the dense masks (:func:`allowed`) and flex's block masks both call it.
    """
    if pattern.mask in ("causal", "document"):
        return same & (j <= i)
    if pattern.mask == "sliding_window":
        return same & (j <= i) & (j > i - (pattern.window or 0))
    if pattern.mask == "prefix_lm":
        return same & ((j <= i) | (j < (pattern.prefix or 0)))
    return same


def allowed(pattern: AttentionPattern, table: TokenTable, queries: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean (rows, q, keys): True where a query may see a key. ``queries``: token indices (None: all)."""
    seg_q = table.segment if queries is None else table.segment[:, queries]
    pos_q = table.position if queries is None else table.position[:, queries]
    same = seg_q[:, :, None] == table.segment[:, None, :]
    return visible(pattern, same, pos_q[:, :, None], table.position[:, None, :])


def alibi_slopes(heads: int) -> torch.Tensor:
    """The ALiBi paper's per-head slopes: 2^(−8k/h′) for k = 1 … h′, h′ the largest power of two ≤ h; when h
    is not a power of two the rest are every other slope of 2h′ (its 1st, 3rd, …), as BLOOM does."""
    closest = 2 ** math.floor(math.log2(heads))
    base = torch.tensor([2 ** (-8 * (k + 1) / closest) for k in range(closest)], dtype=torch.float64)
    if closest == heads:
        return base
    extra = torch.tensor([2 ** (-4 * (2 * k + 1) / closest) for k in range(heads - closest)], dtype=torch.float64)
    return torch.cat([base, extra])


def score_bias(
    pattern: AttentionPattern, table: TokenTable, heads: int, queries: torch.Tensor | None = None
) -> torch.Tensor | None:
    """ALiBi's additive bias (rows, heads, q, keys) in float64; None for any other modifier."""
    if pattern.score_mod != "alibi":
        return None
    pos_q = table.position if queries is None else table.position[:, queries]
    distance = (pos_q[:, :, None] - table.position[:, None, :]).abs().to(torch.float64)
    slopes = alibi_slopes(heads).to(distance.device)
    return -slopes[None, :, None, None] * distance[:, None]


def softcapped(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """cap·tanh(scores / cap): Gemma 2's soft-cap, one formula for every path that applies it."""
    return torch.tanh(scores / cap) * cap


def modify_scores(pattern: AttentionPattern, scores: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Apply the score modifier to scaled scores (new tensors, never in place)."""
    if pattern.score_mod == "softcap":
        assert pattern.softcap is not None
        scores = softcapped(scores, pattern.softcap)
    if bias is not None:
        scores = scores + bias.to(scores.dtype)
    return scores


def describe(pattern: AttentionPattern) -> str:
    """A short label: ``sliding_window(256)+softcap(50)``; ``none`` for plain bidirectional attention."""
    parts = [pattern.mask]
    if pattern.mask == "sliding_window":
        parts[0] += f"({pattern.window})"
    if pattern.mask == "prefix_lm":
        parts[0] += f"({pattern.prefix})"
    if pattern.score_mod == "softcap":
        parts.append(f"softcap({pattern.softcap:g})")
    elif pattern.score_mod == "alibi":
        parts.append("alibi")
    return "+".join(parts)
