"""The case a result row ran, rebuilt from its shape columns: what the cost model prices it at (the size of its score
matrix for advise, its stages for explain)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mhabench.pattern import AttentionPattern
from mhabench.results.cells import number, text
from mhabench.results.columns import (
    BATCH,
    CAUSAL,
    D_MODEL,
    DTYPE,
    HEAD_DIM,
    HEADS,
    KV_HEADS,
    LENGTHS,
    MASK,
    MODE,
    PHASE,
    SCENARIO,
    SEQ_LEN,
    WINDOW,
    flag,
)
from mhabench.scenario.cases import Case as ShapeCase
from mhabench.scenario.config import DTYPES


def row_case(row: Mapping[str, Any]) -> ShapeCase | None:
    """The case a row ran, rebuilt from its shape columns (no bias, seed 0: neither changes a cost); None where the
    row lacks a shape field, has an unknown dtype or ran documents (their lengths are a label, not the rows)."""
    shape = [number(row, name) for name in (BATCH, SEQ_LEN, D_MODEL, HEADS)]
    if text(row, DTYPE) not in DTYPES or None in shape or text(row, LENGTHS) not in ("", "none"):
        return None  # documents: their lengths are a label in the row, not the rows the kernel ran
    batch, seq_len, d_model, heads = (int(cell or 0) for cell in shape)
    mask = text(row, MASK) or ("causal" if flag(row.get(CAUSAL)) is True else "none")
    return ShapeCase(
        scenario=text(row, SCENARIO),
        batch=batch,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        kv_heads=int(number(row, KV_HEADS) or heads),
        head_dim=int(number(row, HEAD_DIM) or d_model // heads),  # Gemma 2, Qwen3: heads wider than d_model / heads
        bias=False,
        dtype=text(row, DTYPE),
        seed=0,
        pattern=AttentionPattern(mask=mask, window=int(number(row, WINDOW) or 0) or None),  # type: ignore[arg-type]
        mode=text(row, MODE) or "forward",
        phase=text(row, PHASE) or "prefill",
    )
