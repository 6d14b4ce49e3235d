"""The exit code a CI job acts on after ``compare --fail-on-regression`` or ``ab --fail-on-regression``.

- ``0`` no regression: no row slower past the threshold, no counted work risen past it, every row judged;
- ``1`` regression: a row's whole interval is slower than the threshold, or its counted work rose past it (the
  work needs no interval: it does not move with the machine's load);
- ``3`` cannot judge: no regression found, but the machine moved too much, too unevenly, for some rows to be
  judged (``--on-noise pass`` makes this ``0``, the line saying so is printed either way).

``2`` stays what it is for every command: bad input (an unreadable or half-written run, an unknown option).
"""

from __future__ import annotations

import dataclasses
import enum

NO_REGRESSION, REGRESSION, CANNOT_JUDGE = 0, 1, 3
ON_NOISE = ("fail", "pass")


class Outcome(str, enum.Enum):
    NO_REGRESSION = "no regression"
    REGRESSION = "regression"
    CANNOT_JUDGE = "cannot judge"

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class GateResult:
    """What the gate found, counted: slower rows, rows whose counted work rose, rows that cannot be judged."""

    slower: int
    work_rose: int
    cannot_judge: int

    @property
    def outcome(self) -> Outcome:
        if self.slower or self.work_rose:
            return Outcome.REGRESSION
        return Outcome.CANNOT_JUDGE if self.cannot_judge else Outcome.NO_REGRESSION

    def exit_code(self, on_noise: str = "fail") -> int:
        """The process's exit code; ``on_noise`` ("fail" or "pass") decides what ``cannot judge`` gives."""
        outcome = self.outcome
        if outcome is Outcome.REGRESSION:
            return REGRESSION
        if outcome is Outcome.CANNOT_JUDGE and on_noise == "fail":
            return CANNOT_JUDGE
        return NO_REGRESSION
