"""The answer of a whole group of cases (or a whole run) in one sentence.

It is what ``make run`` prints under its table and what the comparison across runs sets side by side:
along a group's only swept field, the crossover's segments ("n = 128 … 512: `naive` and `fused`
tied; n = 2048: `fused` wins"); otherwise how many cases each answer holds, naming the cases of an
answer that holds few of them.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence

from mhabench.analysis.advice.cases import MeasuredCase, lines_along, swept
from mhabench.analysis.advice.crossover import segments, segments_text
from mhabench.analysis.advice.pick import Pick
from mhabench.analysis.advice.statement import PICK, Statement

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
