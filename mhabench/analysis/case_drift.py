"""Drift inside one case, and the medians it makes incomparable.

Implementations of a case are timed in shared rounds, but each leaves the rounds when it has its samples
or has spent its own cap, so an implementation with few samples was timed in the case's first rounds
only. When the machine changes speed during the case (a neighbour finishes, the clock moves), that
implementation's median describes an earlier, different machine than the median of one that took every
round: a masks run once read ``flex`` 4.28 ms and ``fused`` 6.83 ms while both were 1.26× over
``naive`` round by round. The paired speedup (:mod:`mhabench.analysis.speedup`) is immune; the medians
are not, and the table must say so rather than contradict the speedup beside them.

The machine's movement is read off the implementation that took the most rounds (the longest record of
the case): the median of its first third of rounds against the median of its last third. A row whose
rounds are a shorter prefix is "from another stretch" when the longest row's median over that prefix
differs from its median over the rounds after it. Either counts only when it is larger than
``DRIFT_THRESHOLD`` and the Mann-Whitney test on the two stretches says it is no accident of noise
(p below ``DRIFT_ALPHA``): rounds on a busy machine scatter by tens of percent, and a run's noise is
already flagged as such.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mhabench.analysis.case_label import case_label
from mhabench.analysis.estimate import is_ok, raw_samples, rounds_of
from mhabench.analysis.speedup import group_key
from mhabench.analysis.stats import mann_whitney_p
from mhabench.results.columns import IMPL

DRIFT_THRESHOLD = 0.10
"""Relative movement of the machine within a case, or between two stretches of it, that is reported: the
default ``noise_threshold``, so a move the run's own noise flag would not ignore."""
DRIFT_ALPHA = 0.01
"""Two stretches of rounds differ only when a Mann-Whitney test says so at this level: scattered rounds are noise."""
MIN_DRIFT_ROUNDS = 9
"""Fewest rounds of the longest row to compare a first third with a last third (3 rounds each at least)."""


@dataclasses.dataclass(frozen=True)
class CaseDrift:
    """A case whose machine moved while it was timed, and the rows whose medians come from another stretch."""

    case: str
    reference_impl: str
    rounds: int
    change: float
    """Last third of the reference's rounds over its first third, minus 1 (negative: the machine sped up)."""
    early: tuple[tuple[str, int], ...]
    """(implementation, rounds it took) of the rows timed in a stretch whose level differs from the whole case's."""


def case_drifts(rows: pd.DataFrame) -> list[CaseDrift]:
    """Every case (and repeat) of ``rows`` whose machine moved by more than ``DRIFT_THRESHOLD`` inside it."""
    if rows.empty or not {IMPL}.issubset(rows.columns):
        return []
    keys = group_key(rows)
    groups: dict[tuple[str, ...], list[dict]] = {}
    for record in rows.to_dict("records"):  # once: a frame per group would cost more than the statistics
        groups.setdefault(tuple(str(record.get(key)) for key in keys), []).append(record)
    return [drift for records in groups.values() if (drift := _drift_of(records)) is not None]


def _drift_of(records: Sequence[dict]) -> CaseDrift | None:
    together = [r for r in records if is_ok(r) and rounds_of(r) is not None and raw_samples(r)]
    if len(together) < 2 or len({rounds_of(r) for r in together}) != 1:
        return None
    longest = max(together, key=lambda r: len(raw_samples(r)))
    samples = np.asarray(raw_samples(longest))
    if len(samples) < MIN_DRIFT_ROUNDS:
        return None
    third = len(samples) // 3
    first, last = samples[:third], samples[-third:]
    change = float(np.median(last) / np.median(first) - 1)
    early = tuple(
        (str(r[IMPL]), len(raw_samples(r)))
        for r in together
        if len(raw_samples(r)) < len(samples) and _moved(samples[: len(raw_samples(r))], samples[len(raw_samples(r)) :])
    )
    if not _moved(first, last) and not early:
        return None
    return CaseDrift(case_label(longest), str(longest[IMPL]), len(samples), change, early)


def _moved(before: np.ndarray, after: np.ndarray) -> bool:
    """The machine moved between two stretches: beyond the threshold either way, and not by chance."""
    if min(len(before), len(after)) < 2:
        return False
    shift = abs(np.log(np.median(after) / np.median(before)))
    return bool(shift > np.log1p(DRIFT_THRESHOLD) and mann_whitney_p(list(before), list(after)) < DRIFT_ALPHA)
