"""One statement of advice as data: the rule that made it (its reason code, docs/advise.md), the numbers it rests
on, the rows it quotes, and the question it answers.

No English here: :mod:`mhabench.views.wording` writes each statement from a template keyed by its rule, so a tool
or a CI job reads the numbers and a reader the sentence, and no module reads another's sentences.
"""

from __future__ import annotations

import dataclasses
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
    """One finding. ``rule`` is its reason code (docs/advise.md lists each with its threshold); ``group`` the case
    group (scenario) it belongs to, "" for a run or across runs; ``scope`` where it applies (a case label, a swept
    field, a group, a run); ``figures`` every number and name its sentence needs."""

    kind: str
    rule: str
    group: str
    scope: str
    figures: Mapping[str, Any]
    rows: tuple[RowRef, ...]
