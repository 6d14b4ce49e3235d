"""The one rule that calls a change between two measurements faster, slower, the same, or unclear.

``compare`` (two runs), the history gate and advise's replication caveat all judge a ratio the same
way: by its whole interval against the threshold, never by the point estimate alone. A ratio whose
interval lies wholly past ``1 + threshold`` is slower; wholly below ``1 / (1 + threshold)`` faster;
wholly inside the band the same; anything that reaches across a threshold is unclear (``~``), since
the data allow both answers. Symmetric in log space, so 1.2× slower and 1.2× faster are equally far.

Between processes a machine moves by more than one process's interval shows (allocator history,
thread placement, clocks). ``between_process_spread`` widens the interval by that relative spread
on both sides before judging, so a difference smaller than the machine's own run-to-run movement is
never faster or slower.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

from mhabench.analysis.case_label import case_label
from mhabench.results.columns import IMPL, SCENARIO


class Change(str, enum.Enum):
    """The verdict on a candidate/base ratio (> 1: the candidate is slower)."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    UNCLEAR = "~"


class Unjudged(str, enum.Enum):
    """A compared row that gets no :class:`Change`: in one run only, failed in either (no ratio to judge), or timed
    while the runs' reference workload says the machine moved more than the threshold
    (:mod:`mhabench.analysis.machine_drift`). Beside ``Change`` they make every word of compare's ``verdict``
    column; str-valued, so the column holds the words."""

    CANNOT_JUDGE = "cannot judge"
    NOT_COMPARED = "not compared"
    ONLY_IN_BASE = "only in base"
    ONLY_IN_CANDIDATE = "only in candidate"

    __str__ = str.__str__


class RowNote(str, enum.Enum):
    """Why a compared row reads as it does, by code: what left it without a ratio, test or interval, what it was
    read across, what widened it. Each :class:`Note` carries its numbers; ``mhabench.views.machine`` words them."""

    NOT_OK = "not_ok"
    """One-process runs: a side (``base``, ``candidate`` or ``both``) did not run ok: its ``status`` and ``error``."""
    NO_TEST = "no_test"
    """Fewer than 2 ``samples`` on a side: no test and no interval."""
    NO_INTERVAL = "no_interval"
    """Fewer than ``needs`` ``samples`` on a side: no interval."""
    WITHIN_SPREAD = "within_spread"
    """Faster or slower, but not past the threshold once widened by the machine's between-process ``spread``."""
    ACROSS_PROCESSES = "across_processes"
    """Read across processes: ``base_ok`` of ``base_all`` against ``candidate_ok`` of ``candidate_all``, and
    whether they were ``too_few`` for an interval."""
    PROCESSES_OK = "processes_ok"
    """A side with no ok process: ``ok`` of ``processes`` ran ok (with the first failure's ``status`` and
    ``error`` when none did)."""
    NO_SHARED_PROCESS = "no_shared_process"
    """Two versions in one run: no process ran both ok (``base_rows``, ``candidate_rows`` rows each)."""
    SAME_ROUNDS = "same_rounds"
    """Two versions in one run: paired in the same rounds, read across ``processes`` of ``of``."""

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class Note:
    """One :class:`RowNote` of a compared row with the numbers its words need."""

    code: RowNote
    numbers: Mapping[str, Any]


def widened(ci_low: float, ci_high: float, between_process_spread: float = 0.0) -> tuple[float, float]:
    """The interval stretched by a relative between-process spread on both sides (in log space)."""
    factor = 1.0 + max(between_process_spread, 0.0)
    return ci_low / factor, ci_high * factor


def judge_change(ci_low: float, ci_high: float, threshold: float, between_process_spread: float = 0.0) -> Change:
    """Faster / slower only when the whole (widened) interval is past the threshold; same only when inside it."""
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return Change.UNCLEAR
    low, high = widened(ci_low, ci_high, between_process_spread)
    upper, lower = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if low > upper:
        return Change.SLOWER
    if high < lower:
        return Change.FASTER
    if low >= lower and high <= upper:
        return Change.SAME
    return Change.UNCLEAR


def unjudged_row(key_values: Mapping[str, Any], shown: Mapping[str, Any]) -> dict[str, Any]:
    """A row of a two-run comparison before anything is measured into it: its key, the label of the side it is
    shown from, every figure NaN and no verdict yet. Both pairings (replicate by replicate, and pooled across
    processes) start from it, so their tables have the same columns."""
    return {
        **key_values,
        "scenario": shown.get(SCENARIO),
        "case": case_label(shown),
        "impl": shown[IMPL],
        "base_ms": math.nan,
        "candidate_ms": math.nan,
        "ratio": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "p_value": math.nan,
        "verdict": None,
        "notes": (),
    }
