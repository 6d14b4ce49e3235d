"""``compare`` of two runs where either is replicated: each row read across processes, not replicate i with i.

A replicated run's ``repeat`` *i* is process *i* (``mhabench.run.replicates``). Matching replicate *i* of one
run with replicate *i* of the other pairs two processes that share nothing but a number, and judges a ratio of
two single processes by a within-process interval: exactly the comparison issue 26 found flipping. Here each
side's ok processes give one median latency each, and the change is read across them, the two-run form of
advise's reading of one replicated run (:mod:`mhabench.analysis.estimate`):

- **ratio**: the ratio of the geometric means of the two sides' per-process medians (``base_ms`` and
  ``candidate_ms`` are those geometric means, so the ratio is the one the table's two columns show);
- **interval**: Student's t for the difference of the mean log medians with the variance pooled over both
  sides (:func:`mhabench.analysis.estimate.two_sided_across`, ``scipy.stats.ttest_ind``, equal variances: one
  machine), ``n_base + n_candidate − 2`` degrees of freedom. Each process's median carries its within-process
  noise and its process's offset, so the spread of those medians is both at once, from both runs; a one-process
  side contributes its value and no variance;
- **p-value**: the same test's (informative; the verdict is the interval's, as for every comparison);
- **the machine's spread** measured by the runs themselves (:func:`measured_spread`): the median over
  (case, implementation) of ``max / min − 1`` of its per-process medians, in either run. ``compare`` widens
  every interval by the larger of it and the calibrated spread before ``judge_change``, so a difference
  smaller than the machine's between-process movement is never faster or slower.

Fewer than three processes in all (or none with a variance) leave no interval: the row is ``~``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.estimate import MIN_TWO_SIDED_PROCESSES, between_process_range, by_key, is_ok, two_sided_across
from mhabench.analysis.verdict import Note, RowNote, Unjudged, unjudged_row
from mhabench.results.columns import ERROR, LATENCY_MS, REPEAT, STATUS

Record = dict[str, Any]


def compare_rows(base: pd.DataFrame, candidate: pd.DataFrame, key: Sequence[str]) -> list[Record]:
    """One record per (case, implementation) of either run, in ``compare``'s row format, its ``verdict`` left for
    the caller to judge (None) unless the row could not be compared; ``key`` without ``repeat`` matches them."""
    key = [column for column in key if column != REPEAT]
    return [_row(key, base_rows, candidate_rows) for base_rows, candidate_rows in matched(base, candidate, key)]


def matched(base: pd.DataFrame, candidate: pd.DataFrame, key: Sequence[str]) -> list[tuple[list[Record], list[Record]]]:
    """The base's and the candidate's records of each value of ``key`` in either run: the base's values in its
    order, then those only the candidate has in the candidate's."""
    base_groups, candidate_groups = (by_key(frame.to_dict("records"), key) for frame in (base, candidate))
    order = [*base_groups, *(found for found in candidate_groups if found not in base_groups)]
    return [(base_groups.get(found, []), candidate_groups.get(found, [])) for found in order]


def measured_spread(base: pd.DataFrame, candidate: pd.DataFrame, key: Sequence[str]) -> float:
    """The runs' own between-process spread: the median over (case, implementation) and run of ``max / min − 1``
    of the per-process median latencies (0 where no row ran ok in two processes)."""
    key = [column for column in key if column != REPEAT]
    ranges = [
        between_process_range(_ok_medians(records))
        for frame in (base, candidate)
        for records in by_key(frame.to_dict("records"), key).values()
    ]
    finite = [value for value in ranges if math.isfinite(value)]
    return float(np.median(finite)) if finite else 0.0


def _ok_medians(records: list[Record]) -> list[float]:
    return [float(record[LATENCY_MS]) for record in records if is_ok(record) and pd.notna(record.get(LATENCY_MS))]


def _row(key: list[str], base: list[Record], candidate: list[Record]) -> Record:
    shown = (base or candidate)[0]
    out: Record = unjudged_row({column: shown.get(column) for column in key}, shown)
    if not base or not candidate:
        out["verdict"] = (Unjudged.ONLY_IN_CANDIDATE if not base else Unjudged.ONLY_IN_BASE).value
        return out
    base_ms, candidate_ms = _ok_medians(base), _ok_medians(candidate)
    if not base_ms or not candidate_ms:
        out["verdict"] = Unjudged.NOT_COMPARED.value
        out["notes"] = tuple(_processes_ok(name, side) for name, side in (("base", base), ("candidate", candidate)))
        return out
    estimate, p_value = two_sided_across(candidate_ms, base_ms)
    out.update(
        base_ms=_geometric_mean(base_ms),
        candidate_ms=_geometric_mean(candidate_ms),
        ratio=estimate.ratio,
        ci_low=estimate.ci_low,
        ci_high=estimate.ci_high,
        p_value=p_value,
        notes=(_across_note(len(base_ms), len(base), len(candidate_ms), len(candidate)),),
    )
    return out


def _geometric_mean(values: list[float]) -> float:
    """The typical per-process median of one side: the ratio is exactly the candidate's over the base's."""
    return float(np.exp(np.mean(np.log(values))))


def _across_note(base_ok: int, base_all: int, candidate_ok: int, candidate_all: int) -> Note:
    """The processes each side was read across (base vs candidate), and whether they are too few for an interval."""
    too_few = base_ok + candidate_ok < MIN_TWO_SIDED_PROCESSES or max(base_ok, candidate_ok) < 2
    numbers = {
        "base_ok": base_ok,
        "base_all": base_all,
        "candidate_ok": candidate_ok,
        "candidate_all": candidate_all,
        "too_few": too_few,
    }
    return Note(RowNote.ACROSS_PROCESSES, numbers)


def _processes_ok(name: str, records: list[Record]) -> Note:
    """How many of a side's processes ran ok; where none did, the first failure's status and error."""
    ok = sum(is_ok(record) for record in records)
    failed = next((record for record in records if not is_ok(record)), None)
    numbers: Record = {"side": name, "ok": ok, "processes": len(records)}
    if failed is not None and not ok:
        error = failed.get(ERROR)
        numbers.update(status=str(failed[STATUS]), error=error if isinstance(error, str) else "")
    return Note(RowNote.PROCESSES_OK, numbers)
