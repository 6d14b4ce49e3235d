"""One statement of advice as data: the rule that made it (its reason code, docs/advise.md), the numbers and
names it rests on, and the question it answers.

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
class Statement:
    """One finding. ``rule`` is its reason code (docs/advise.md lists each with its threshold); ``group`` the case
    group (scenario) it belongs to, "" for a run or across runs; ``scope`` where it applies (a case label, a swept
    field, a group, a run); ``figures`` every number and name its sentence needs."""

    kind: str
    rule: str
    group: str
    scope: str
    figures: Mapping[str, Any]

    @property
    def impl(self) -> str:
        """The implementation a statement under a case is about ("" for none): the first its figures name."""
        return str(self.figures.get("impl", next(iter(self.figures), "")))
