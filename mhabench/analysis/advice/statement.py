"""One statement of advice: a sentence a rule made, the figures in it, and the rows it rests on; and the
question it answers.

Advice is only as good as the measurements under it, so every sentence names the rows (run, case,
implementation) whose columns it quotes: a reader can look them up in results.csv, and a tool or a
CI job can act on the figures without parsing the sentence.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

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
