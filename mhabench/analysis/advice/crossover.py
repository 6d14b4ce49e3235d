"""Where the answer changes: along each swept field, the measured points between which the pick differs.

A line is the cases along one swept field with every other swept field held fixed. Consecutive points
with the same answer form a segment, and a crossover is the step from one segment to the next, given
by the two measured points that bracket it. Nothing between them was measured, so nothing is said
about where inside that gap the change lies: no interpolation is ever presented as a measurement.

Only points with an answer (a winner, a tie, what ran) are compared. A point whose pick is "cannot
tell" is a gap of its own: a change is placed only between two answers that differ, the gap inside
its bracket, and an answer that is the same on both sides of a gap does not change there.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.cases import Case, lines_along, order, swept
from mhabench.analysis.advice.pick import CANNOT_TELL, Pick
from mhabench.analysis.advice.statement import CROSSOVER, RowRef, Statement
from mhabench.analysis.speedup import is_ok, samples_of

Segment = tuple[list[Any], Pick]
"""The values of the axis one answer holds over, and the pick at the first of them."""


def segments(axis: str, line: Sequence[Case], picks: Mapping[str, Pick]) -> list[Segment]:
    """The line's points merged where consecutive answers agree; each "cannot tell" point stays a gap of its own."""
    found: list[Segment] = []
    for case in line:
        one = picks[case.case_id]
        if found and one.verdict != CANNOT_TELL and found[-1][1].answer == one.answer:
            found[-1][0].append(case.fields[axis])
        else:
            found.append(([case.fields[axis]], one))
    return found


def segments_text(axis: str, found: Sequence[Segment]) -> str:
    """``n = 128 … 512: `naive` and `fused` tied; n = 2048: `fused` wins; n = 4096: cannot tell (1–5 rounds)``."""
    return "; ".join(f"{wording.values(axis, values)}: {_phrase(one)}" for values, one in found)


def _phrase(one: Pick) -> str:
    """The pick's phrase; at a gap, with the rounds its ok rows were timed in (how little it rests on)."""
    if one.verdict != CANNOT_TELL:
        return one.phrase()
    counts = sorted({len(samples_of(row)) for rows in one.case.repeats for row in rows if is_ok(row)})
    rounds = f"{counts[0]}–{counts[-1]}" if len(counts) > 1 else f"{counts[0]}"
    return f"cannot tell ({rounds} round{'s' if counts[-1] != 1 else ''})"


def steps(found: Sequence[Segment]) -> list[tuple[Any, Any]]:
    """The measured values bracketing each change: between consecutive segments with an answer whose
    answers differ (a gap between them lies inside the bracket). A gap alone is never a change."""
    told = [(values, one) for values, one in found if one.verdict != CANNOT_TELL]
    return [
        (before[-1], after[0]) for (before, one), (after, two) in itertools.pairwise(told) if one.answer != two.answer
    ]


def crossovers(cases: Sequence[Case], picks: Mapping[str, Pick]) -> list[Statement]:
    """One statement per line whose answer changes, and one per axis along which no line's does."""
    statements: list[Statement] = []
    for axis in swept(cases):
        lines = lines_along(cases, axis)
        changing = [(fixed, line) for fixed, line in lines if steps(segments(axis, line, picks))]
        statements += [_change(axis, fixed, line, picks) for fixed, line in changing]
        if lines and not changing:
            statements.append(_steady(axis, [line for _, line in lines], picks))
    return statements


def _refs(line: Sequence[Case], picks: Mapping[str, Pick]) -> tuple[RowRef, ...]:
    """The rows the answers along a line rest on: each case's picked (or tied, or fastest) rows."""
    return tuple(case.ref(impl) for case in line for impl in picks[case.case_id].impls)


def _change(axis: str, fixed: list[tuple[str, Any]], line: Sequence[Case], picks: Mapping[str, Pick]) -> Statement:
    found = segments(axis, line, picks)
    changes = steps(found)
    brackets = "; ".join(f"{wording.field(axis, low)} and {wording.field(axis, high)}" for low, high in changes)
    where = " ".join(part for part in (_axis(axis), wording.place(fixed)) if part)
    sentence = (
        f"along {where}: {segments_text(axis, found)}. The answer changes between the measured {brackets}; "
        "nothing in between was measured."
    )
    figures = {
        "axis": axis,
        "fixed": {name: value for name, value in fixed},
        "segments": [{"values": values, "answer": one.phrase(), "verdict": one.verdict} for values, one in found],
        "changes_between": [list(step) for step in changes],
    }
    return Statement(CROSSOVER, "crossover", line[0].group, where, sentence, figures, _refs(line, picks))


def _steady(axis: str, lines: Sequence[Sequence[Case]], picks: Mapping[str, Pick]) -> Statement:
    points = [case for line in lines for case in line]
    gaps = [case for case in points if picks[case.case_id].verdict == CANNOT_TELL]
    answers = sorted({picks[case.case_id].phrase() for case in points if case not in gaps})
    measured = sorted({case.fields[axis] for case in points}, key=order)
    where = "in each of its lines" if len(lines) > 1 else "on its line"
    told = " where the data can tell" if gaps else ""
    unknown = f"; cannot tell at {', '.join(case.label for case in gaps)}" if gaps else ""
    sentence = (
        f"along {_axis(axis)}: no crossover; {where} the answer is the same at every measured {_axis(axis)}{told} "
        f"({'; '.join(answers) or 'none'}){unknown}."
    )
    figures = {
        "axis": axis,
        "lines": len(lines),
        "answers": answers,
        "values": measured,
        "cannot_tell": [case.label for case in gaps],
    }
    refs = tuple(ref for line in lines for ref in _refs(line, picks))
    return Statement(CROSSOVER, "no_crossover", lines[0][0].group, _axis(axis), sentence, figures, refs)


def _axis(axis: str) -> str:
    return wording.AXIS_NAMES.get(axis, axis)
