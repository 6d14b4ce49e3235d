"""One spelling of names and figures for every view: implementation names in backticks, ratios with their
interval (as many digits as it takes to tell a bound from 1), bytes in binary units, a case's fields as ``n=1024``.
Advise's and explain's sentences, the tables and the report all spell a figure the same way through it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mhabench.results.columns import BATCH, BIAS, CAUSAL, D_MODEL, DTYPE, HEADS, KV_HEADS, MODE, PHASE, SEQ_LEN

AXIS_NAMES = {SEQ_LEN: "n", HEADS: "h", D_MODEL: "d", BATCH: "b", KV_HEADS: "kv"}
"""The short names the case labels use (``n=128 h=8 d=512 b=1``); other fields keep their column name."""
NUMERIC_FIELDS = (SEQ_LEN, HEADS, D_MODEL, BATCH, KV_HEADS, "tensor_parallel")
"""Fields whose values are ordered: a run of them reads as a range (``n = 128 … 512``)."""
MAX_DIGITS = 6
"""Interval bounds get at most this many decimals: a bound within 1e-6 of 1 is 1 for any reader."""


def impl(name: str) -> str:
    return f"`{name}`"


def impls(names: Iterable[str]) -> str:
    """```a```, ```a` and `b```, ```a`, `b` and `c```."""
    quoted = [impl(name) for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def interval(low: float | None, high: float | None) -> str:
    """``[1.45–1.48]``, or "(no interval)" where the bootstrap had nothing to resample. A bound on the other side of
    1 than its rounding (1.003 → "1.00") gets more digits, so an interval that excludes 1 never reads as one that
    touches it."""
    if not (_finite(low) and _finite(high)):
        return "(no interval)"
    assert low is not None and high is not None
    digits = 2
    while digits < MAX_DIGITS and any(_crosses_one(bound, digits) for bound in (low, high)):
        digits += 1
    return f"[{low:.{digits}f}–{high:.{digits}f}]"


def _crosses_one(bound: float, digits: int) -> bool:
    shown = round(bound, digits)
    return (bound > 1 and shown <= 1) or (bound < 1 and shown >= 1)


def ratio(value: float, low: float | None, high: float | None) -> str:
    """``1.46× [1.45–1.48]``."""
    return f"{value:.2f}× {interval(low, high)}"


def size(nbytes: float) -> str:
    """Bytes in binary units: ``128 MiB``, ``1.5 GiB``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, power = float(nbytes), 0
    while abs(value) >= 1024 and power < len(units) - 1:
        value, power = value / 1024, power + 1
    return f"{value:.0f} {units[power]}" if power == 0 or value >= 100 else f"{value:.3g} {units[power]}"


def percent(fraction: float) -> str:
    return f"{100 * fraction:.0f} %"


def milliseconds(value_ms: float) -> str:
    """``0.217 ms``, ``85.9 ms``: three significant figures."""
    return f"{value_ms:.3g} ms"


def field(name: str, value: Any) -> str:
    """One field of a case as the labels write it: ``n=128``, ``causal``/``not causal``, ``float32``."""
    if name in (CAUSAL, BIAS):
        return name if str(value).lower() == "true" else f"not {name}"
    if name in (DTYPE, MODE, PHASE):
        return str(value)
    return f"{AXIS_NAMES.get(name, name)}={value}"


def place(fields: Mapping[str, Any]) -> str:
    """``at h=8 b=1`` for the fixed fields of a line; "" when nothing else varies."""
    return "at " + " ".join(field(name, value) for name, value in fields.items()) if fields else ""


def values(name: str, measured: Sequence[Any]) -> str:
    """The measured values of one field: ``n = 128``, ``n = 128 … 512``, or ``causal, not causal``."""
    if name not in NUMERIC_FIELDS:
        return ", ".join(field(name, value) for value in measured)
    short = AXIS_NAMES.get(name, name)
    return f"{short} = {measured[0]}" if len(measured) == 1 else f"{short} = {measured[0]} … {measured[-1]}"


def more(named: Sequence[Any], total: int) -> str:
    return f" and {total - len(named)} more" if total > len(named) else ""


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"
