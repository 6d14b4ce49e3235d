"""``mhabench history DIR``'s work, so the CLI command only parses options and prints: the options checked
before anything is written, runs imported, the store read as series of one metric, its tables in the chosen
format, and the gate's verdicts.

An empty timeline says why (a metric this history never measured, such as energy on a CPU): an empty table
alone reads as a broken store, and a gate that judged nothing must not look like one that passed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

from mhabench.analysis.device_mix import run_device_mix
from mhabench.analysis.stats import parse_threshold
from mhabench.history import gate as gate_mod
from mhabench.history import series, store
from mhabench.history import table as history_table
from mhabench.history.gate import GateResult
from mhabench.history.ingest import add_held_run
from mhabench.history.series import History, Metric
from mhabench.results.store import load_run
from mhabench.views import formats
from mhabench.views.device_mix import device_lines
from mhabench.views.table import TableModel, to_markdown

FORMATS = ("terminal", "md", "json")
"""What ``history`` writes, in the one ``--format`` vocabulary (``markdown`` is an alias of ``md``)."""
NOT_MEASURED_HINT = {"energy": " (NVML measures it on CUDA only)"}
"""Why a metric may be missing from every row of a history."""


@dataclasses.dataclass(frozen=True)
class Options:
    """The checked options: a bad one is refused before ``--import`` writes anything."""

    output_format: str
    metric: Metric
    threshold: float


def check_options(output_format: str, metric: str, threshold: str | None) -> Options:
    chosen = formats.parse_format(output_format, FORMATS)
    limit = parse_threshold(threshold) if threshold is not None else gate_mod.DEFAULT_THRESHOLD
    return Options(chosen, series.metric_named(metric), limit)


def import_runs(directory: Path, refs: Sequence[str], baseline: str | None, results_root: Path) -> Iterator[str]:
    """Add each run folder or id; one line per run (rows added: 0 when the store already had it), and the device
    caveat of a run whose cases were measured on more than one device (its points mix devices)."""
    for ref in refs:
        run = load_run(ref, results_root)
        run_id, added = add_held_run(directory, run, baseline)
        yield f"imported {run_id}: {added} rows"
        yield from device_lines(run_device_mix(run.frame))


@dataclasses.dataclass(frozen=True)
class HistoryView:
    """The series of one metric, and the gate's verdict on their newest points where ``--gate`` asked for one."""

    history: History
    threshold: float
    judged: list[GateResult] | None

    def tables(self) -> list[TableModel]:
        return [
            history_table.points_table(self.history),
            history_table.changes_table(self.history),
            history_table.fingerprints_table(self.history),
        ]

    def text(self, output_format: str) -> str:
        """Markdown or JSON, for stdout."""
        if output_format == "json":
            return history_table.to_json(self.history, self.judged)
        return "\n\n".join(to_markdown(table) for table in self.tables())

    def notes(self) -> list[str]:
        """Lines for stderr: why the timeline is empty, and each gated series' verdict."""
        lines = [] if self.history.series else [empty_reason(self.history.metric)]
        if self.judged is not None:
            if not self.judged:
                lines.append("gate: no series to judge, so nothing regressed (the gate passes)")
            lines += [result.message(self.threshold) for result in self.judged]
        return lines

    @property
    def regression(self) -> bool:
        return any(result.regression for result in self.judged or [])


def empty_reason(metric: Metric) -> str:
    hint = NOT_MEASURED_HINT.get(metric.name, "")
    return f"history: no {metric.name} series: no ok row of this history has a {metric.column} value{hint}"


def read(directory: Path, options: Options, cases: Sequence[str], impls: Sequence[str], gate: bool) -> HistoryView:
    """The store as series of the chosen metric, filtered, and judged by the gate when asked."""
    built = series.build(*store.read(directory), options.metric, options.threshold, cases, impls)
    return HistoryView(built, options.threshold, gate_mod.gate(built, options.threshold) if gate else None)
