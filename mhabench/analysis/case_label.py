"""The short name of a case: what the speedup rows, the comparisons and every table call it.

A ``case_id`` (``scenario/b1-n128-d64-h4``) is unique but long; the label is the shape, then only what
differs from the defaults, so a narrow terminal still shows the case whole. Analysis adds it to its
rows (``speedup_rows``, ``compare_runs``), so it lives here rather than among the renderers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mhabench.results.cells import cell
from mhabench.results.columns import (
    BATCH,
    BIAS,
    CAUSAL,
    D_MODEL,
    DTYPE,
    HEAD_DIM,
    HEADS,
    KV_HEADS,
    LAYOUT,
    LENGTHS,
    MASK,
    MODE,
    PHASE,
    PREFIX,
    SCORE_MOD,
    SEQ_LEN,
    SOFTCAP,
    WINDOW,
)

NON_DEFAULTS = ((MODE, "forward"), (PHASE, "prefill"))
"""Fields named in the label only when they differ from these defaults."""


CAUSAL_WORDS = frozenset({"sliding_window", "document"})
"""Masks whose own word (``window=128``, ``document``) already says causal: ``causal`` is not repeated."""


def case_label(row: Mapping[str, Any]) -> str:
    """``n=128 h=4 d=64 b=1 float32``, then ``d_k=…`` (a head_dim set apart), ``kv=…`` (grouped-query), ``causal``,
    ``bias``, ``train``, ``decode``.

    ``b`` is the input's rows: a packed batch of documents is one row (its documents are counted in its
    lengths label), though the ``batch`` column counts the documents.
    """
    kv_heads, head_dim = row.get(KV_HEADS), cell(row.get(HEAD_DIM))
    extras = [f"d_k={int(head_dim)}" if head_dim is not None and head_dim * row[HEADS] != row[D_MODEL] else ""]
    extras += [f"kv={kv_heads}" if cell(row.get(KV_HEADS)) is not None and kv_heads != row[HEADS] else ""]
    implied = {CAUSAL} if str(row.get(MASK)) in CAUSAL_WORDS else set()
    extras += [flag for flag in (CAUSAL, BIAS) if bool(row[flag]) and flag not in implied]
    extras += [str(row.get(field)) for field, default in NON_DEFAULTS if row.get(field, default) != default]
    extras += pattern_words(row)
    rows = 1 if row.get(LAYOUT) == "packed" else row[BATCH]
    shape = f"n={row[SEQ_LEN]} h={row[HEADS]} d={row[D_MODEL]} b={rows} {row[DTYPE]}"
    return " ".join([shape, *(extra for extra in extras if extra)])


def pattern_words(row: Mapping[str, Any]) -> list[str]:
    """``window=128``, ``prefix=64``, ``document``; ``docs=<lengths> packed``; ``softcap=50`` or ``alibi``:
    what a row's attention pattern adds to plain (causal) attention. Nothing for a run older than the columns."""
    mask, score_mod = row.get(MASK), row.get(SCORE_MOD)
    words = {
        "sliding_window": f"window={_integer(row, WINDOW)}",
        "prefix_lm": f"prefix={_integer(row, PREFIX)}",
        "document": "document",
    }.get(str(mask), "")
    documents = row.get(LENGTHS)
    if isinstance(documents, str) and documents not in ("", "none"):
        words += f" docs={documents} {row.get(LAYOUT)}"
    if score_mod == "softcap":
        words += f" softcap={float(row[SOFTCAP]):g}"
    elif score_mod == "alibi":
        words += " alibi"
    return [words.strip()]


def _integer(row: Mapping[str, Any], column: str) -> int | None:
    value = cell(row.get(column))
    return None if value is None else int(value)
