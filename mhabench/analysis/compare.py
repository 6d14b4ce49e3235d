"""``mhabench compare``: speedups within one run, and regressions between two runs.

Within one run every implementation is compared to a baseline case by case and repeat (the median
of per-round ratios with a paired bootstrap CI, or the ratio of medians where rounds do not align:
``mhabench.analysis.speedup``). Between two runs samples are never paired (different processes); rows are
matched on their case key (``repeat`` and ``tensor_parallel`` included; an older run reads with
their defaults) and judged by ``mhabench.analysis.verdict.judge_change``: the whole bootstrap interval
of the ratio of medians against the threshold, never the point alone, so ``same`` means the data rule
out a change as large as the threshold. The Mann-Whitney U p-value (Holm-corrected over every compared
row) stays as an informative column; it does not decide. :class:`Summary` sums the verdicts up and
judges the run-wide shift (the geometric mean of the row ratios, bootstrapped over rows) by the same
rule. Before any number, the manifests are compared: results from different device kinds are refused
unless forced.

This module only computes; ``mhabench.views.compare`` renders a :class:`Comparison` (terminal, CSV,
JSON, Markdown).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pandas as pd
import scipy.stats

from mhabench.analysis import machine_drift, pooled_change, stats, work_change
from mhabench.analysis.answer import answer_run
from mhabench.analysis.estimate import is_ok, samples_of, within_process
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.analysis.verdict import Change, Note, RowNote, Unjudged, judge_change, unjudged_row
from mhabench.errors import InputError
from mhabench.results import store as results
from mhabench.results.calibration import load_calibration
from mhabench.results.columns import CASE_KEY, ERROR, LATENCY_MS, REPEAT, SCENARIO, STATUS
from mhabench.results.fingerprint import Fingerprint

Record = dict[str, Any]
ENVIRONMENT_FIELDS = (
    "device_kind",
    "device_name",
    "cpu_model",
    "torch",
    "cuda",
    "cudnn",
    "threads",
    "mhabench_version",
    "python",
    "git_commit",
)


class IncomparableRunsError(InputError):
    """Two runs measured on different kinds of device: their numbers say nothing about each other."""


class NoCommonRowsError(InputError):
    """Two runs that share no case: there is nothing to compare."""


@dataclasses.dataclass(frozen=True)
class Difference:
    """One manifest field that differs between the two runs."""

    field: str
    base: str
    candidate: str


@dataclasses.dataclass(frozen=True)
class Summary:
    """Two runs in one line: verdict counts, and the run-wide shift judged like a row.

    ``shift`` is the geometric mean of the compared rows' ratios, its interval a bootstrap over rows
    (None below ``MIN_SHIFT_ROWS`` rows, where rows are too few to resample). A machine that slowed down
    between the runs moves every row the same way; one row past the threshold does not make a shift.
    """

    counts: dict[str, int]
    shift: float | None = None
    shift_ci: tuple[float, float] | None = None
    shift_verdict: Change | None = None


MIN_SHIFT_ROWS = 3


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What ``compare`` found: one row per (case, implementation), plus the manifest differences."""

    base_id: str
    candidate_id: str | None  # None: within one run
    rows: pd.DataFrame
    differences: list[Difference]
    threshold: float | None = None
    baseline: str | None = None
    between_process_spread: float = 0.0
    """Two runs: the relative spread every interval was widened by before a verdict (0: none)."""
    replicated: bool = False
    """One run of several processes (``replicates: N``): its rows are read pooled across them
    (:mod:`mhabench.analysis.pooled_rows`)."""
    same_rounds: bool = False
    """Two versions timed in the same rounds of one run (``mhabench ab``): each ratio is paired, not two medians."""
    machine: machine_drift.MachineMove | None = None
    """Two runs: their reference workload's timings, read against the threshold (:mod:`.machine_drift`)."""

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows whose whole interval is slower than the threshold (what ``--fail-on-regression`` gates on)."""
        return self._with_verdict(Change.SLOWER)

    @property
    def unjudged(self) -> pd.DataFrame:
        """Rows the machine's movement left ``cannot judge`` (``--on-noise`` decides what they do to the gate)."""
        return self._with_verdict(Unjudged.CANNOT_JUDGE)

    def _with_verdict(self, verdict: Change | Unjudged) -> pd.DataFrame:
        return self.rows[self.rows["verdict"] == verdict] if "verdict" in self.rows else self.rows.iloc[0:0]

    @property
    def work_rises(self) -> pd.DataFrame:
        """Rows whose counted work rose past the threshold: a regression whatever the machine did."""
        return work_change.rises(self.rows, self.threshold or 0.0)

    @property
    def summary(self) -> Summary | None:
        """The verdicts counted and the run-wide shift (two runs only)."""
        if self.candidate_id is None or self.threshold is None:
            return None
        verdicts = self.rows["verdict"].astype(str)
        counts = {str(v): int(n) for v, n in verdicts.value_counts(sort=False).items()}
        judgeable = self.rows[self.rows["verdict"] != Unjudged.CANNOT_JUDGE]
        ratios = judgeable["ratio"].to_numpy(dtype=float)
        ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
        if len(ratios) < MIN_SHIFT_ROWS:
            return Summary(counts)
        low, high = _geometric_mean_interval(ratios)
        shift = float(np.exp(np.log(ratios).mean()))
        return Summary(counts, shift, (low, high), judge_change(low, high, self.threshold, self.between_process_spread))


def speedups(run: results.Run, baseline: str = DEFAULT_BASELINE) -> Comparison:
    """Per case: each implementation's speedup over ``baseline`` (with CI), memory ratio, intensity, and ``pick``:
    ``winner`` or ``tie`` where the run's answer (:mod:`mhabench.analysis.answer`) says so, else ""."""
    impls = {row.case.impl for row in run.rows}
    if baseline not in impls:
        known = ", ".join(sorted(impls))
        raise InputError(f"--baseline: {baseline!r} is not in run {run.run_id} (implementations: {known})")
    replicated = run.manifest.replicated
    rows = answer_run(run, baseline=baseline).with_picks(speedup_rows(run.frame, baseline))
    return Comparison(run.run_id, None, rows, [], baseline=baseline, replicated=replicated)


# --- two runs ----------------------------------------------------------------------------------


def device_kind(run: results.Run) -> str:
    kind = run.manifest.environment.get("device_kind")
    if kind:
        return str(kind)
    devices = sorted({str(row.case.device).split(":")[0] for row in run.rows if row.case.device is not None})
    return ",".join(devices) or "unknown"


def manifest_differences(base: results.Run, candidate: results.Run) -> list[Difference]:
    """Environment fields, dtypes and timing settings that differ between the two runs."""

    def facts(run: results.Run) -> dict[str, str]:
        env = run.manifest.environment
        values = {name: str(env.get(name)) for name in ENVIRONMENT_FIELDS}
        values["device_kind"] = device_kind(run)
        values["dtypes"] = ",".join(sorted({str(row.case.dtype) for row in run.rows if row.case.dtype is not None}))
        timing = (run.manifest.config or {}).get("timing")
        values["timing"] = json.dumps(timing, sort_keys=True) if timing is not None else "None"
        return values

    base_facts, candidate_facts = facts(base), facts(candidate)
    return [
        Difference(name, base_facts[name], candidate_facts[name])
        for name in base_facts
        if base_facts[name] != candidate_facts[name]
    ]


def match_key(base: pd.DataFrame, candidate: pd.DataFrame) -> list[str]:
    """The case key both runs can be matched on: the schema's key columns present in both."""
    key = [c for c in CASE_KEY if c in base.columns and c in candidate.columns]
    if base.duplicated(key).any() or candidate.duplicated(key).any():
        key.append(SCENARIO)  # the same shape measured by two scenarios of one run
    return key


def compare_runs(
    base: results.Run,
    candidate: results.Run,
    threshold: float,
    force: bool = False,
    between_process_spread: float = 0.0,
) -> Comparison:
    """Match rows on the case key; ratio with CI, Holm-corrected Mann-Whitney p-value and a verdict per row.

    Two runs are two processes: a ``faster`` or ``slower`` whose interval, widened by the machine's
    ``between_process_spread`` (``mhabench calibrate``), reaches back across the threshold becomes ``~``
    (:func:`mhabench.analysis.verdict.judge_change`). Where either run is replicated, each row is read across
    the processes of both runs (:mod:`mhabench.analysis.pooled_change`) and the spread the runs themselves
    measured is the least the intervals are widened by."""
    differences = manifest_differences(base, candidate)
    base_kind, candidate_kind = device_kind(base), device_kind(candidate)
    if base_kind != candidate_kind and not force:
        raise IncomparableRunsError(
            f"{base.run_id} ran on {base_kind}, {candidate.run_id} on {candidate_kind}: "
            "different device kinds are not comparable (pass --force to compare anyway)"
        )
    key = match_key(base.frame, candidate.frame)
    if base.manifest.replicated or candidate.manifest.replicated:  # read across processes, not i with i
        rows = pooled_change.compare_rows(base.frame, candidate.frame, key)
        if all(row["verdict"] in (Unjudged.ONLY_IN_BASE, Unjudged.ONLY_IN_CANDIDATE) for row in rows):
            raise NoCommonRowsError(f"{base.run_id} and {candidate.run_id} have no (case, implementation) in common")
        measured = pooled_change.measured_spread(base.frame, candidate.frame, key)
        pooled_key = [column for column in key if column != REPEAT]
        spread = max(between_process_spread, measured)
        return _judged(base, candidate, rows, differences, threshold, spread, pooled_key)
    matches = pooled_change.matched(base.frame, candidate.frame, key)
    if not any(base_rows and candidate_rows for base_rows, candidate_rows in matches):
        raise NoCommonRowsError(
            f"{base.run_id} and {candidate.run_id} have no rows in common (matched on {', '.join(key)})"
        )
    rows = [_compare_row(key, base_rows, candidate_rows) for base_rows, candidate_rows in matches]
    return _judged(base, candidate, rows, differences, threshold, between_process_spread, key)


def _judged(
    base: results.Run,
    candidate: results.Run,
    rows: list[dict[str, Any]],
    differences: list[Difference],
    threshold: float,
    between_process_spread: float,
    key: list[str],
) -> Comparison:
    """The compared rows with their Holm-corrected p-values and verdicts (widened by the between-process spread),
    left unjudged where the machine moved (:mod:`.machine_drift`), with their counted work's changes
    (:mod:`.work_change`)."""
    machine = machine_drift.machine_move(base, candidate, threshold)
    machine_drift.unjudge(rows, machine)
    adjusted = stats.holm([r["p_value"] for r in rows])
    for row, p_holm in zip(rows, adjusted, strict=True):
        row["p_holm"] = p_holm
        if row["verdict"] is None:
            row["verdict"] = judge_change(row["ci_low"], row["ci_high"], threshold).value
        unclear_within_spread(row, threshold, between_process_spread)
    work_change.annotate(rows, base.frame, candidate.frame, key)
    return Comparison(
        base.run_id,
        candidate.run_id,
        pd.DataFrame(rows),
        differences,
        threshold=threshold,
        between_process_spread=between_process_spread,
        machine=machine,
    )


def unclear_within_spread(row: dict[str, Any], threshold: float, between_process_spread: float) -> None:
    """A ``faster`` / ``slower`` row whose interval, widened by the between-process spread, no longer clears the
    threshold becomes ``~``, with a note: the difference is one the machine makes between its own processes."""
    if between_process_spread <= 0 or row["verdict"] not in (Change.FASTER, Change.SLOWER):
        return
    if judge_change(row["ci_low"], row["ci_high"], threshold, between_process_spread) != row["verdict"]:
        row["verdict"] = Change.UNCLEAR.value
        row["notes"] = (*row["notes"], Note(RowNote.WITHIN_SPREAD, {"spread": between_process_spread}))


def machine_spread(runs: list[results.Run]) -> float:
    """The largest calibrated between-process spread among the runs' machines (0 where none is calibrated)."""
    found = [load_calibration(Fingerprint.of(run.manifest.environment or {})) for run in runs]
    spreads = [c.between_process_spread for c in found if c is not None and math.isfinite(c.between_process_spread)]
    return max(spreads, default=0.0)


def _geometric_mean_interval(ratios: np.ndarray) -> tuple[float, float]:
    """95 % percentile bootstrap over rows of the geometric mean ratio (fixed seed: reproducible)."""
    logs = np.log(ratios)
    if np.ptp(logs) == 0:
        return float(ratios[0]), float(ratios[0])
    result = scipy.stats.bootstrap(
        (logs,), np.mean, confidence_level=stats.CONFIDENCE_LEVEL, method="percentile", random_state=0
    )
    return float(np.exp(result.confidence_interval.low)), float(np.exp(result.confidence_interval.high))


def _compare_row(key: list[str], base_rows: list[Record], candidate_rows: list[Record]) -> Record:
    """One matched row of two one-process runs (the first where a run measured the key twice)."""
    shown = (base_rows or candidate_rows)[0]
    out = unjudged_row({column: shown.get(column) for column in key}, shown)
    if not base_rows or not candidate_rows:
        out["verdict"] = (Unjudged.ONLY_IN_CANDIDATE if not base_rows else Unjudged.ONLY_IN_BASE).value
        return out
    base, cand = base_rows[0], candidate_rows[0]
    failed = [(name, side) for name, side in (("base", base), ("candidate", cand)) if not is_ok(side)]
    if failed:
        out["verdict"] = Unjudged.NOT_COMPARED.value
        out["notes"] = _failed_notes(failed)
        return out
    base_samples, cand_samples = samples_of(base), samples_of(cand)
    estimate, _ = within_process(cand_samples, base_samples, same_rounds=False)  # two processes: never paired
    out.update(
        base_ms=float(base[LATENCY_MS]),
        candidate_ms=float(cand[LATENCY_MS]),
        ratio=estimate.ratio,
        ci_low=estimate.ci_low,
        ci_high=estimate.ci_high,
        p_value=stats.mann_whitney_p(base_samples, cand_samples),
    )
    out["notes"] = _few_samples_notes(min(len(base_samples), len(cand_samples)))
    return out


def _failed_notes(failed: list[tuple[str, Record]]) -> tuple[Note, ...]:
    """Why a row was not compared; a status and error both runs share is noted once, for ``both``."""
    found = [(name, str(side[STATUS]), _error(side.get(ERROR))) for name, side in failed]
    if len(found) == 2 and found[0][1:] == found[1][1:]:
        found = [("both", *found[0][1:])]
    return tuple(Note(RowNote.NOT_OK, {"side": side, "status": status, "error": why}) for side, status, why in found)


def _error(error: Any) -> str:
    """A row's stored error ("" where it has none: a float NaN where the CSV cell was empty)."""
    return error if isinstance(error, str) else ""


def _few_samples_notes(fewest: int) -> tuple[Note, ...]:
    """What a side with few samples leaves out: the test below 2, the interval below ``MIN_INTERVAL_SAMPLES``."""
    if fewest < 2:
        return (Note(RowNote.NO_TEST, {"samples": fewest}),)
    if fewest < stats.MIN_INTERVAL_SAMPLES:
        return (Note(RowNote.NO_INTERVAL, {"samples": fewest, "needs": stats.MIN_INTERVAL_SAMPLES}),)
    return ()
