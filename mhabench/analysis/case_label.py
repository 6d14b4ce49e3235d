"""The short name of a case: what the speedup rows, the comparisons and every table call it.

A ``case_id`` (``scenario/b1-n128-d64-h4``) is unique but long; the label is the shape, then only what
differs from the defaults, so a narrow terminal still shows the case whole. Analysis adds it to its
rows (``speedup_rows``, ``compare_runs``), so it lives here rather than among the renderers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mhabench.results.schema import BATCH, BIAS, CAUSAL, D_MODEL, DTYPE, HEAD_DIM, HEADS, KV_HEADS, MODE, PHASE, SEQ_LEN

NON_DEFAULTS = ((MODE, "forward"), (PHASE, "prefill"))
"""Fields named in the label only when they differ from these defaults."""


def case_label(row: Mapping[str, Any]) -> str:
    """``n=128 h=4 d=64 b=1 float32``, then ``d_k=…`` (a head_dim set apart), ``kv=…`` (grouped-query), ``causal``,
    ``bias``, ``train``, ``decode``."""
    kv_heads, head_dim = row.get(KV_HEADS), _value(row, HEAD_DIM)
    extras = [f"d_k={int(head_dim)}" if head_dim is not None and head_dim * row[HEADS] != row[D_MODEL] else ""]
    extras += [f"kv={kv_heads}" if _value(row, KV_HEADS) is not None and kv_heads != row[HEADS] else ""]
    extras += [flag for flag in (CAUSAL, BIAS) if bool(row[flag])]
    extras += [str(row.get(field)) for field, default in NON_DEFAULTS if row.get(field, default) != default]
    shape = f"n={row[SEQ_LEN]} h={row[HEADS]} d={row[D_MODEL]} b={row[BATCH]} {row[DTYPE]}"
    return " ".join([shape, *(extra for extra in extras if extra)])


def _value(row: Mapping[str, Any], column: str) -> Any:
    """The cell, or None where the row has no value (a run older than the column has NaN)."""
    value = row.get(column)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value
