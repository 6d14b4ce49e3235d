"""One statement of advice and its wording: the sentence a rule made, the figures in it, the rows it rests
on, the question it answers; and how every rule writes names, ratios, bytes and fields in that sentence.

Advice is only as good as the measurements under it, so every sentence names the rows (run, case,
implementation) whose columns it quotes: a reader can look them up in results.csv, and a tool or a
CI job can act on the figures without parsing the sentence. Rules produce finished sentences (the views
only lay them out), so the formatting lives here too, at the analysis layer, one spelling for every rule:
implementation names in backticks, ratios with their interval, bytes in binary units.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mhabench.analysis.stats import RatioEstimate
from mhabench.results.columns import BATCH, BIAS, CAUSAL, D_MODEL, DTYPE, HEADS, KV_HEADS, MODE, PHASE, SEQ_LEN

PICK, CROSSOVER, WHY, CHANGE, CAVEAT, ACROSS = "pick", "crossover", "why", "change", "caveat", "across"
ENERGY = "energy"
KINDS = (PICK, CROSSOVER, WHY, ENERGY, CHANGE, CAVEAT, ACROSS)
"""Every kind of statement, in the order a reader wants them: the answer first, what it cannot tell last."""
DEVICE_KINDS = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class Question:
    """What the reader asks about beyond the run: a device kind (``--for``) and implementations (``--impl``)."""

    device_kind: str | None = None
    impls: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RowRef:
    """One result row: enough to find it again (``load_run(run_id)``, then case_id and impl)."""

    run_id: str
    case_id: str
    impl: str


@dataclasses.dataclass(frozen=True)
class Statement:
    """A sentence of advice. ``rule`` names the rule that made it (docs/advise.md lists each with its
    threshold); ``group`` is the case group (scenario) it belongs to, "" for a run or across runs;
    ``scope`` is where it applies (a case label, a line of a sweep, a group, a run)."""

    kind: str
    rule: str
    group: str
    scope: str
    text: str
    figures: Mapping[str, Any]
    rows: tuple[RowRef, ...]

    def record(self) -> dict[str, Any]:
        """JSON-ready: NaN and infinities become null, row references plain objects."""
        return {
            "kind": self.kind,
            "rule": self.rule,
            "group": self.group,
            "scope": self.scope,
            "text": self.text,
            "figures": _plain(self.figures),
            "rows": [dataclasses.asdict(row) for row in self.rows],
        }


def _plain(value: Any) -> Any:
    """A figure as JSON can hold it, at any depth (a crossover's fixed fields are a mapping, its segments a
    list of mappings): mappings stay objects, sequences lists, numpy scalars numbers."""
    if isinstance(value, Mapping):
        return {str(name): _plain(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(number):
        return None
    return int(number) if float(number).is_integer() and not isinstance(value, float) else number


# --- wording: one spelling of names and figures for every rule ---------------------------------------

AXIS_NAMES = {SEQ_LEN: "n", HEADS: "h", D_MODEL: "d", BATCH: "b", KV_HEADS: "kv"}
"""The short names the case labels use (``n=128 h=8 d=512 b=1``); other fields keep their column name."""
NUMERIC_FIELDS = (SEQ_LEN, HEADS, D_MODEL, BATCH, KV_HEADS, "tensor_parallel")
"""Fields whose values are ordered: a change along them has a place ("between n = 512 and 2048")."""


def impl(name: str) -> str:
    return f"`{name}`"


def impls(names: Iterable[str]) -> str:
    """```a```, ```a` and `b```, ```a`, `b` and `c```."""
    quoted = [impl(name) for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


MAX_DIGITS = 6
"""Interval bounds get at most this many decimals: a bound within 1e-6 of 1 is 1 for any reader."""


def interval(estimate: RatioEstimate) -> str:
    """``[1.45–1.48]``, or "(no interval)" where the bootstrap had nothing to resample. A bound on the
    other side of 1 than its rounding (1.003 → "1.00") gets more digits, so an interval that excludes 1
    never reads as one that touches it."""
    low, high = estimate.ci_low, estimate.ci_high
    if not (math.isfinite(low) and math.isfinite(high)):
        return "(no interval)"
    digits = 2
    while digits < MAX_DIGITS and any(_crosses_one(bound, digits) for bound in (low, high)):
        digits += 1
    return f"[{low:.{digits}f}–{high:.{digits}f}]"


def _crosses_one(bound: float, digits: int) -> bool:
    """The bound lies on one side of 1 but rounds to 1 (or past it) at ``digits`` decimals."""
    shown = round(bound, digits)
    return (bound > 1 and shown <= 1) or (bound < 1 and shown >= 1)


def ratio(estimate: RatioEstimate) -> str:
    """``1.46× [1.45–1.48]``."""
    return f"{estimate.ratio:.2f}× {interval(estimate)}"


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


def place(fields: Sequence[tuple[str, Any]]) -> str:
    """``at h=8 b=1`` for the fixed fields of a line; "" when nothing else varies."""
    return "at " + " ".join(field(name, value) for name, value in fields) if fields else ""


def values(name: str, measured: Sequence[Any]) -> str:
    """The measured values of one field: ``n = 128``, ``n = 128 … 512``, or ``causal, not causal``."""
    if name not in NUMERIC_FIELDS:
        return ", ".join(field(name, value) for value in measured)
    short = AXIS_NAMES.get(name, name)
    return f"{short} = {measured[0]}" if len(measured) == 1 else f"{short} = {measured[0]} … {measured[-1]}"
