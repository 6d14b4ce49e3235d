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

from mhabench.analysis.advice import wording
from mhabench.analysis.advice.cases import MeasuredCase, lines_along, order, swept
from mhabench.analysis.advice.pick import CANNOT_TELL, TIED, Pick
from mhabench.analysis.advice.wording import CROSSOVER, PICK, RowRef, Statement
from mhabench.analysis.estimate import is_ok, samples_of

Segment = tuple[list[Any], list[Pick]]
"""The values of the axis one answer holds over, and the pick at each of them."""


ORDERED_FIELDS = (*wording.NUMERIC_FIELDS, "head_dim", "window", "prefix", "softcap")
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


def segments_text(axis: str, found: Sequence[Segment]) -> str:
    """``n = 128 … 512: `naive` and `fused` tied; n = 2048: `fused` wins; n = 4096: cannot tell (1–5 rounds)``."""
    return "; ".join(f"{wording.values(axis, values)}: {segment_phrase(held)}" for values, held in found)


def segment_phrase(held: Sequence[Pick]) -> str:
    """The answer a segment holds: its pick's phrase, or ``ties among …`` where the tie's members shift."""
    members = {impl for one in held for impl in one.impls}
    if held[0].verdict == TIED and any(set(one.impls) != members for one in held):
        return f"ties among {wording.impls(sorted(members))}"
    return _phrase(held[0])


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
        say = _change if ordered(axis) else _by_setting
        statements += [say(axis, fixed, line, picks) for fixed, line in changing]
        if lines and not changing:
            statements.append(_steady(axis, [line for _, line in lines], picks))
    return statements


def _refs(line: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> tuple[RowRef, ...]:
    """The rows the answers along a line rest on: each case's picked (or tied, or fastest) rows."""
    return tuple(case.ref(impl) for case in line for impl in picks[case.case_id].impls)


def _change(
    axis: str, fixed: list[tuple[str, Any]], line: Sequence[MeasuredCase], picks: Mapping[str, Pick]
) -> Statement:
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
        "segments": [
            {"values": values, "answer": segment_phrase(held), "verdict": held[0].verdict} for values, held in found
        ],
        "changes_between": [list(step) for step in changes],
    }
    return Statement(CROSSOVER, "crossover", line[0].group, where, sentence, figures, _refs(line, picks))


def _by_setting(
    axis: str, fixed: list[tuple[str, Any]], line: Sequence[MeasuredCase], picks: Mapping[str, Pick]
) -> Statement:
    """Along a yes/no or named setting: the answer per setting, no bracket (nothing lies between packed and padded)."""
    where = " ".join(part for part in (_axis(axis), wording.place(fixed)) if part)
    found = segments(axis, line, picks)
    sentence = f"by {where}: {segments_text(axis, found)}."
    figures = {
        "axis": axis,
        "fixed": {name: value for name, value in fixed},
        "answers": [{"values": values, "answer": segment_phrase(held)} for values, held in found],
    }
    return Statement(CROSSOVER, "by_setting", line[0].group, where, sentence, figures, _refs(line, picks))


def _steady(axis: str, lines: Sequence[Sequence[MeasuredCase]], picks: Mapping[str, Pick]) -> Statement:
    points = [case for line in lines for case in line]
    gaps = [case for case in points if picks[case.case_id].verdict == CANNOT_TELL]
    answers = sorted({picks[case.case_id].phrase() for case in points if case not in gaps})
    measured = sorted({case.fields[axis] for case in points}, key=order)
    where = "in each of its lines" if len(lines) > 1 else "on its line"
    told = " where the data can tell" if gaps else ""
    unknown = f"; cannot tell at {', '.join(case.label for case in gaps)}" if gaps else ""
    crossover = "no crossover; " if ordered(axis) else ""
    sentence = (
        f"along {_axis(axis)}: {crossover}{where} the answer is the same at every measured {_axis(axis)}{told} "
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


# --- a group's answer in one sentence ---------------------------------------------------------------------------------

GROUP = "group"
"""The rule of a group's one-sentence answer: the group's headline, which every view shows first."""
NAMED_CASES = 3
"""An answer held by at most this many cases names them; a larger share is only counted."""


def counts_text(cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> str:
    """``fused` wins in 20 of 24 cases; cannot tell in 4 (…)``, the commonest answer first."""
    by_answer: dict[str, list[MeasuredCase]] = collections.defaultdict(list)
    for case in cases:
        by_answer[picks[case.case_id].phrase()].append(case)
    ordered = sorted(by_answer.items(), key=lambda item: -len(item[1]))
    parts = []
    for index, (phrase, held) in enumerate(ordered):
        named = f" ({', '.join(case.label for case in held)})" if len(held) <= NAMED_CASES and index else ""
        parts.append(f"{phrase} in {len(held)}{f' of {len(cases)} cases' if not index else ''}{named}")
    return "; ".join(parts)


def group_answer(group: str, cases: Sequence[MeasuredCase], picks: Mapping[str, Pick]) -> Statement:
    """The group's answer: segments along its one swept field, else the counts per answer."""
    axes = swept(cases)
    lines = lines_along(cases, axes[0]) if len(axes) == 1 else []
    answer = segments_text(axes[0], segments(axes[0], lines[0][1], picks)) if lines else counts_text(cases, picks)
    counts = collections.Counter(picks[case.case_id].phrase() for case in cases)
    refs = tuple(case.ref(impl) for case in cases for impl in picks[case.case_id].impls)
    figures = {"cases": len(cases), "answers": dict(counts), "swept": axes}
    return Statement(PICK, GROUP, group, group, f"{group}: {answer}.", figures, refs)
