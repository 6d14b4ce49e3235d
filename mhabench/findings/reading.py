"""What one run measured of one case, in the terms a claim is graded in.

:func:`read_case` is the one place this package reads a run's answer record (the pick of a case) and the
across-process lead of one implementation over another; everything else here works on the
:class:`CaseReading` it returns, so swapping the estimator behind it changes one function.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from typing import Any

from mhabench.errors import InputError
from mhabench.results.store import Run

WINNER, TIED = "winner", "tied"
""":attr:`CaseReading.verdict` of a case one implementation wins, and of one whose fastest rows are tied; any other
verdict (cannot tell, nothing ran, only one ran) is said in the words of :data:`VERDICT_WORDS`."""
VERDICT_WORDS = {
    "winner": WINNER,
    "tie": TIED,
    "cannot_tell": "cannot tell",
    "only": "only",
    "nothing_ran": "nothing ran",
}
"""The grade's word for each verdict of the answer record."""


@dataclasses.dataclass(frozen=True)
class Speedup:
    """``faster``'s speedup over ``slower`` (time of ``slower`` / time of ``faster``) across the run's processes:
    the estimate with its 95 % interval, whether the faster side is clearly faster by the tie rule, and each
    process's own paired ratio."""

    faster: str
    slower: str
    ratio: float
    ci_low: float
    ci_high: float
    clearly: bool
    per_process: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class CaseReading:
    """One case of one run: its pick (verdict and implementations, fastest first) and every pair's speedup."""

    run_id: str
    label: str
    verdict: str
    picked: tuple[str, ...]
    impls: tuple[str, ...]
    speedups: Mapping[tuple[str, str], Speedup]

    def speedup(self, faster: str, slower: str) -> Speedup | None:
        return self.speedups.get((faster, slower))


_ANSWERS: dict[int, tuple[Run, Any]] = {}
"""Each run's answer record, read once however many claims ask about it (the run is kept so its id stays its)."""


def matches(fields: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every wanted field has the wanted value (numbers compared as numbers)."""
    return all(name in fields and _same(fields[name], value) for name, value in wanted.items())


def _same(have: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(have, bool):
        return bool(have) == want if isinstance(have, bool) and isinstance(want, bool) else False
    if isinstance(want, int | float) and isinstance(have, int | float):
        return math.isclose(float(have), float(want))
    return str(have) == str(want)


def read_case(run: Run, wanted: Mapping[str, Any]) -> CaseReading | None:
    """The case of ``run`` whose fields match ``wanted`` (None when no case does); an InputError when several do.

    The pick is the run's answer record's (across processes for a replicated run) and a speedup is the across-process
    lead of one implementation over another (per-process paired ratios combined with a t interval), the figure
    ``mhabench compare RUN --baseline SLOWER`` prints in its pooled rows."""
    from mhabench.analysis.advice.pick import clearly_slower
    from mhabench.analysis.answer import answer_run
    from mhabench.analysis.estimate import is_ok, row_ratio, rows_ratio_across
    from mhabench.results.columns import CASE_ID, IMPL, REPEAT

    if id(run) not in _ANSWERS:
        _ANSWERS[id(run)] = (run, answer_run(run))
    record = _ANSWERS[id(run)][1]
    found = [case for case in record.cases if matches(case.fields, wanted)]
    if not found:
        return None
    if len(found) > 1:
        labels = ", ".join(case.label for case in found)
        raise InputError(
            f"case {dict(wanted)}: matches {len(found)} cases of {run.run_id} ({labels}); name more fields"
        )
    case = found[0]
    rows = [row for row in run.frame.to_dict("records") if str(row[CASE_ID]) == case.case_id and is_ok(row)]
    by_impl: dict[str, dict[int, Any]] = {}
    for row in sorted(rows, key=lambda row: _replicate(row.get(REPEAT))):
        by_impl.setdefault(str(row[IMPL]), {})[_replicate(row.get(REPEAT))] = row

    def per_process(faster: Mapping[int, Any], slower: Mapping[int, Any]) -> tuple[float, ...]:
        ratios = []
        for replicate in sorted(set(faster) & set(slower)):
            ratios.append(row_ratio(slower[replicate], faster[replicate]).ratio)  # slower's time over faster's
        return tuple(ratios)

    speedups = {}
    for faster, slower in itertools.permutations(by_impl, 2):
        lead = rows_ratio_across(by_impl[slower], by_impl[faster]).interval
        speedups[(faster, slower)] = Speedup(
            faster,
            slower,
            lead.ratio,
            lead.ci_low,
            lead.ci_high,
            clearly_slower(lead),
            per_process(by_impl[faster], by_impl[slower]),
        )
    picked = case.tied or ((case.fastest,) if case.fastest else ())
    return CaseReading(run.run_id, case.label, VERDICT_WORDS[case.verdict], picked, tuple(by_impl), speedups)


def _replicate(value: Any) -> int:
    """The row's process (its repeat); 0 where the run has none."""
    return 0 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)
