"""Where the answer changes: along each swept field, the measured points between which the pick differs.

A line is the cases along one swept field with every other swept field held fixed. Consecutive points
with the same answer form a segment, and a crossover is the step from one segment to the next, given
by the two measured points that bracket it. Nothing between them was measured, so nothing is said
about where inside that gap the change lies: no interpolation is ever presented as a measurement.

Only points with an answer (a winner, a tie, what ran) are compared. A point whose pick is "cannot
tell" is a gap of its own: a change is placed only between two answers that differ, the gap inside
its bracket, and an answer that is the same on both sides of a gap does not change there. Two ties
that share an implementation are one answer: a five-way tie whose fifth member comes and goes says
nothing changed that a reader could act on.

Only an ordered setting (a size: n, heads, batch …) has a "between": along a yes/no or named setting
(packed or padded, causal or not) there is nothing in between to have measured, so the answer is given
per setting (rule ``by_setting``) and never called a crossover.

A group's (or a run's) whole answer in one sentence (rule ``group``) is built from the same segments: it is
what ``make run`` prints under its table and what the comparison across runs sets side by side. Along a
group's only swept field it is the crossover's segments ("n = 128 … 512: `naive` and `fused` tied;
n = 2048: `fused` wins"); otherwise how many cases each answer holds, naming the cases of an answer that
holds few of them.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice.cases import MeasuredCase, lines_along, order, swept
from mhabench.analysis.advice.pick import CANNOT_TELL, TIED, Pick
from mhabench.analysis.estimate import is_ok, samples_of
from mhabench.analysis.statement import CROSSOVER, PICK, Statement
from mhabench.results.columns import BATCH, D_MODEL, HEADS, KV_HEADS, SEQ_LEN

Segment = tuple[list[Any], list[Pick]]
"""The values of the axis one answer holds over, and the pick at each of them."""


ORDERED_FIELDS = (
    SEQ_LEN,
    HEADS,
    D_MODEL,
    BATCH,
    KV_HEADS,
    "tensor_parallel",
    "head_dim",
    "window",
    "prefix",
    "softcap",
)
"""Settings with values between the measured ones: only along these does a change have a bracket."""


def ordered(axis: str) -> bool:
    """Whether the setting has values in between its measured ones (a size), so a change has a bracket."""
    return axis in ORDERED_FIELDS


def same_answer(one: Pick, two: Pick) -> bool:
    """One answer for a reader: the same pick, or two ties that share an implementation (membership shifts)."""
    if one.verdict == TIED and two.verdict == TIED:
        return bool(set(one.impls) & set(two.impls))
    return one.answer == two.answer


def segments(axis: str, line: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> list[Segment]:
    """The line's points merged where consecutive answers agree; each "cannot tell" point stays a gap of its own."""
    found: list[Segment] = []
    for case in line:
        one = picks[case.case_id]
        if found and one.verdict != CANNOT_TELL and same_answer(found[-1][1][-1], one):
            found[-1][0].append(case.fields[axis])
            found[-1][1].append(one)
        else:
            found.append(([case.fields[axis]], [one]))
    return found


def segment_figures(found: Sequence[Segment]) -> list[dict[str, Any]]:
    """Each segment's values and answer (:func:`answer_figures`)."""
    return [{"values": values, **answer_figures(held)} for values, held in found]


def answer_figures(held: Sequence[Pick]) -> dict[str, Any]:
    """The answer a segment holds: its verdict and implementations; ``members`` where a tie's members shift along
    it; at a gap, the fewest and most rounds its ok rows were timed in (how little it rests on)."""
    one = held[0]
    found: dict[str, Any] = one.figures()
    members = sorted({impl for pick in held for impl in pick.impls})
    if one.verdict == TIED and any(set(pick.impls) != set(members) for pick in held):
        found["members"] = members
    if one.verdict == CANNOT_TELL:
        counts = sorted({len(samples_of(row)) for rows in one.case.repeats for row in rows if is_ok(row)})
        found["rounds"] = [counts[0], counts[-1]]
    return found


def steps(found: Sequence[Segment]) -> list[tuple[Any, Any]]:
    """The measured values bracketing each change: between consecutive segments with an answer whose
    answers differ (a gap between them lies inside the bracket). A gap alone is never a change."""
    told = [(values, held) for values, held in found if held[0].verdict != CANNOT_TELL]
    return [
        (before[-1], after[0])
        for (before, one), (after, two) in itertools.pairwise(told)
        if not same_answer(one[-1], two[0])
    ]


def crossovers(cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> list[Statement]:
    """One statement per line whose answer changes, and one per axis along which no line's does."""
    statements: list[Statement] = []
    for axis in swept(cases):
        lines = lines_along(cases, axis)
        changing = [(fixed, line) for fixed, line in lines if steps(segments(axis, line, picks))]
        statements += [_change(axis, fixed, line, picks) for fixed, line in changing]
        if lines and not changing:
            statements.append(_steady(axis, [line for _, line in lines], picks))
    return statements


def _change(
    axis: str, fixed: list[tuple[str, Any]], line: Sequence[MeasuredCase], picks: Mapping[str, Pick]
) -> Statement:
    """Along a size, the measured values each change lies between (``crossover``); along a yes/no or named setting
    the answer per setting (``by_setting``): nothing lies between packed and padded."""
    found = segments(axis, line, picks)
    figures = {"axis": axis, "fixed": dict(fixed), "segments": segment_figures(found)}
    if ordered(axis):
        figures["changes_between"] = [list(step) for step in steps(found)]
    rule = "crossover" if ordered(axis) else "by_setting"
    return Statement(CROSSOVER, rule, line[0].group, axis, figures)


def _steady(axis: str, lines: Sequence[Sequence[MeasuredCase]], picks: Mapping[str, Pick]) -> Statement:
    points = [case for line in lines for case in line]
    gaps = [case for case in points if picks[case.case_id].verdict == CANNOT_TELL]
    answers = {repr(picks[case.case_id].answer): picks[case.case_id].figures() for case in points if case not in gaps}
    figures = {
        "axis": axis,
        "ordered": ordered(axis),
        "lines": len(lines),
        "answers": list(answers.values()),
        "values": sorted({case.fields[axis] for case in points}, key=order),
        "cannot_tell": [case.label for case in gaps],
    }
    return Statement(CROSSOVER, "no_crossover", lines[0][0].group, axis, figures)


# --- a group's answer ---------------------------------------------------------------------------------------------

GROUP = "group"
"""The rule of a group's answer: the group's headline, which every view shows first."""


def counts(cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> list[dict[str, Any]]:
    """Per answer, the commonest first: its verdict and implementations and the labels of the cases it holds."""
    by_answer: dict[tuple[str, tuple[str, ...]], list[MeasuredCase]] = collections.defaultdict(list)
    for case in cases:
        by_answer[picks[case.case_id].answer].append(case)
    held = sorted(by_answer.items(), key=lambda item: -len(item[1]))
    return [
        {"verdict": str(verdict), "impls": list(impls), "labels": [case.label for case in found]}
        for (verdict, impls), found in held
    ]


def group_answer(group: str, cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> Statement:
    """The group's answer: the segments along its one swept field, else the cases each answer holds."""
    axes = swept(cases)
    lines = lines_along(cases, axes[0]) if len(axes) == 1 else []
    figures: dict[str, Any] = {"cases": len(cases), "swept": axes}
    if lines:
        figures.update(axis=axes[0], segments=segment_figures(segments(axes[0], lines[0][1], picks)))
    else:
        figures["counts"] = counts(cases, picks)
    return Statement(PICK, GROUP, group, group, figures)
