"""Run-to-run spread: does a speedup reproduce across runs of one config, or across ``--repeat`` passes?

``mhabench spread RUN [RUN ...]`` answers the question a reader of any benchmark asks first. Several
runs (e.g. three back-to-back ``make run``s, each a fresh process) are read as the repeats of one
run — run *i* becomes repeat *i* — and :func:`mhabench.analysis.speedup.spread_of` gives, per (case,
implementation), each run's speedup over the baseline and their spread ``(max − min) / median``.
One run made with ``--repeat N`` is its own repeats. ``mhabench.views.spread`` renders the result.
"""

from __future__ import annotations

import pandas as pd

from mhabench.analysis.speedup import speedup_rows, spread_of
from mhabench.errors import InputError
from mhabench.results.schema import CASE_ID, IMPL, REPEAT
from mhabench.results.store import Run


def runs_as_repeats(runs: list[Run]) -> pd.DataFrame:
    """The rows of ``runs`` with run *i* as repeat *i*; one run keeps its own repeats.

    Runs must measure the same (case, implementation) pairs, each once: anything else is not a
    repetition of one measurement.
    """
    if len(runs) == 1:
        return runs[0].rows
    frames = []
    for index, run in enumerate(runs):
        if run.rows.empty or run.rows[REPEAT].nunique() > 1:
            raise InputError(f"{run.run_id}: spread over several runs needs runs with rows and without --repeat")
        frames.append(run.rows.assign(**{REPEAT: index}))
    keys = [set(zip(frame[CASE_ID], frame[IMPL], strict=True)) for frame in frames]
    for run, key in zip(runs[1:], keys[1:], strict=True):
        if key != keys[0]:
            raise InputError(f"{run.run_id}: measures other (case, implementation) pairs than {runs[0].run_id}")
    return pd.concat(frames, ignore_index=True)


def speedup_spread(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per case and implementation but the baseline: the line of :func:`spread_of` plus ``speedup_by_repeat``,
    every repeat's speedup over ``baseline`` in repeat order (NaN where that repeat's row failed, so a
    reader sees the failure rather than a shorter list)."""
    present = sorted(set(frame[IMPL]))
    if baseline not in present:
        raise InputError(f"--baseline: {baseline!r} is not in these runs (they have {', '.join(present)})")
    speedups = speedup_rows(frame, baseline)
    lines = spread_of(speedups)
    lines = lines[lines[IMPL] != baseline]
    by_pair = {
        key: [float(v) for v in group.sort_values(REPEAT)["speedup"]]
        for key, group in speedups.groupby([CASE_ID, IMPL], sort=False)
    }
    per_repeat = [by_pair[(line[CASE_ID], line[IMPL])] for line in lines.to_dict("records")]
    return lines.assign(speedup_by_repeat=pd.Series(per_repeat, index=lines.index, dtype=object))
