"""Run-to-run spread: does a speedup reproduce across runs of one config, or across ``--repeat`` passes?

``mhabench spread RUN [RUN ...]`` answers the question a reader of any benchmark asks first. Several
runs (e.g. three back-to-back ``make run``s, each a fresh process) are read as the repeats of one
run — run *i* becomes repeat *i* — and :func:`mhabench.analysis.speedup.spread_of` gives, per (case,
implementation), each run's speedup over the baseline and their spread ``(max − min) / median``.
One run made with ``--repeat N`` is its own repeats.
"""

from __future__ import annotations

import math

import pandas as pd

from mhabench.analysis.speedup import speedup_rows, spread_of
from mhabench.errors import InputError
from mhabench.results.store import Run
from mhabench.views.table import TableModel, format_number


def runs_as_repeats(runs: list[Run]) -> pd.DataFrame:
    """The rows of ``runs`` with run *i* as repeat *i*; one run keeps its own repeats.

    Runs must measure the same (case, implementation) pairs, each once: anything else is not a
    repetition of one measurement.
    """
    if len(runs) == 1:
        return runs[0].rows
    frames = []
    for index, run in enumerate(runs):
        if run.rows.empty or run.rows["repeat"].nunique() > 1:
            raise InputError(f"{run.run_id}: spread over several runs needs runs with rows and without --repeat")
        frames.append(run.rows.assign(repeat=index))
    keys = [set(zip(frame["case_id"], frame["impl"], strict=True)) for frame in frames]
    for run, key in zip(runs[1:], keys[1:], strict=True):
        if key != keys[0]:
            raise InputError(f"{run.run_id}: measures other (case, implementation) pairs than {runs[0].run_id}")
    return pd.concat(frames, ignore_index=True)


def spread_table(frame: pd.DataFrame, baseline: str) -> TableModel:
    """Per case and implementation: every repeat's speedup over ``baseline``, and the spreads."""
    present = sorted(set(frame["impl"]))
    if baseline not in present:
        raise InputError(f"--baseline: {baseline!r} is not in these runs (they have {', '.join(present)})")
    speedups = speedup_rows(frame, baseline)
    lines = spread_of(speedups)
    lines = lines[lines["impl"] != baseline]
    by_pair = {
        key: [float(v) for v in group.sort_values("repeat")["speedup"]]
        for key, group in speedups.groupby(["case_id", "impl"], sort=False)
    }
    cells = [
        [
            line["case"],
            line["impl"],
            str(line["repeats"]),
            " / ".join(format_number(v, ".2f") for v in by_pair[(line["case_id"], line["impl"])]),
            _percent(line["speedup_spread"]),
            _percent(line["latency_spread"]),
        ]
        for line in lines.to_dict("records")
    ]
    return TableModel(
        title=f"run-to-run spread of the speedup over {baseline}: (max − min) / median",
        headers=["case", "impl", "runs", "speedup per run", "speedup spread", "latency spread"],
        cells=cells,
        numeric=[False, False, True, True, True, True],
        groups=[line[0] for line in cells],
        records=lines.drop(columns=["latency_ms_by_repeat"]),
    )


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %" if value is not None and math.isfinite(value) else "-"
