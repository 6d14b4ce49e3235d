"""Runs a config: expand cases, run each (``mhabench.run.case``), write every row as it exists.

A run is ``repeats`` passes over the cases (``run --repeat N``: every case of pass 0, then of pass
1, …), in one process or, with ``isolation: process``, one child process per case. Each finished
row goes to disk at once (``mhabench.results.store.RunWriter``), and the manifest follows the run-folder lifecycle
(``results.lifecycle.run_folder``: running with a heartbeat per row, then complete, interrupted or
failed); a resumed run (``resume_dir``) appends only the (case, implementation, repeat) triples its
folder lacks. A reference workload is timed at the start, between cases on long runs and at the end
(``mhabench.measure.drift``), so the manifest says whether the machine changed under the run. Under
``torchrun`` the run is tensor-parallel (``mhabench.distributed.run``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import torch

from mhabench.impls import core_implementations, get_spec
from mhabench.impls.registry import ImplSpec
from mhabench.measure.allocator import apply_process_settings
from mhabench.measure.drift import DriftWatch
from mhabench.measure.environment import environment
from mhabench.measure.peaks import DevicePeaks, device_peaks, measured_peaks
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.lifecycle import now_iso, run_folder
from mhabench.results.liveness import liveness_fields
from mhabench.results.manifest import Manifest
from mhabench.results.schema import Outcome, ResultRow, RowStatus
from mhabench.results.store import MANIFEST_NAME, RunWriter, new_run_dir, read_manifest, rows_frame
from mhabench.run import roof_record
from mhabench.run.case import CudaContextLostError, identity, modelled_cost, run_case
from mhabench.run.estimate import PlannedRow, RowKey, RunEstimate, estimate_run
from mhabench.run.heap import earlier_objects_set_aside
from mhabench.run.isolation import CaseJob, ChildSetup, isolated_case
from mhabench.run.launch import check_launch
from mhabench.run.ncu_profile import CounterSettings
from mhabench.run.replicates import can_fork, case_order
from mhabench.run.request import RunRequest, Selector
from mhabench.run.roof import RoofCheck
from mhabench.run.shard import folder_name
from mhabench.scenario import plugins
from mhabench.scenario.cases import Case, count_cases, covered_windows, expand_cases
from mhabench.scenario.config import DTYPES, RunConfig
from mhabench.scenario.device import canonical_device, resolve_device
from mhabench.scenario.limits import check_row_count

"""(case, implementation name, repeat) → measure it in this run? (``--shard``, ``--resume``)"""


class Progress(Protocol):
    """What the runner reports while it works (the CLI shows it as a rich progress bar)."""

    def start(self, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    rows: list[ResultRow]
    manifest: Manifest
    """The run's final manifest, as written: with the rows, what the CLI reads after a run instead of the folder."""
    warnings: tuple[str, ...] = ()
    """Lines the user must see after the summary (the machine drifted during the run)."""

    @property
    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def implementations_of(config: RunConfig) -> list[ImplSpec]:
    """The registry entries a config asks for (its list, or every core implementation)."""
    names = config.implementations or core_implementations()
    return [get_spec(name) for name in names]


# --- a whole run -------------------------------------------------------------------------------

_measured_here: list[bool] = []
"""Not empty once this process has measured: torch's OpenMP thread pool exists, and a fork of the process could
hang in it (:func:`measured_in_this_process`)."""


def measured_in_this_process() -> bool:
    """Whether this process has run a config: then a replicate must be a fresh interpreter, not a fork."""
    return bool(_measured_here)


def run(
    config: RunConfig,
    out_root: Path,
    progress: Progress | None = None,
    request: RunRequest | None = None,
) -> RunResult:
    """Run every case of ``config`` ``request.repeats`` times; write ``out_root/<run_id>/``; return the rows.

    ``select`` (of the :class:`RunRequest`) keeps a subset of the (case, implementation, repeat) triples (a shard). With
    ``resume_dir`` the rows already in that folder are kept and only the missing triples run
    (``resume_differences``: what ``--force`` overrode, recorded in the manifest). Its ``case_order_seed``
    above 0 runs the cases in a seeded permutation (a replicate, ``mhabench.run.replicates``). A sweep with
    ``tensor_parallel`` above 1 is refused with the ``torchrun`` command that runs it
    (:func:`mhabench.distributed.run.run_distributed`; the CLI chooses).
    """
    request = request or RunRequest()
    _measured_here.append(True)
    repeats, select, config_path = request.repeats, request.select, request.config_path
    device = resolve_device(config.device)
    specs = implementations_of(config)
    check_row_count(count_cases(config, device) * repeats, len(specs), config.max_rows)
    cases = case_order(expand_cases(config, device), request.case_order_seed)
    check_launch(sorted({case.tensor_parallel for case in cases}), None, config_path)
    process = apply_process_settings(config.allocator, config.threads)  # before any case allocates
    if device.type == "cuda":
        # with an explicit index (torch 2.11 refuses a bare "cuda"), so every kernel targets cuda:N
        torch.cuda.set_device(torch.device(canonical_device(device)))
    writer, manifest = open_run(config, out_root, request, {**environment(device), **process}, len(cases))
    repeats = manifest.repeats
    todo = pending(cases, specs, repeats, select, done_keys(writer))
    if progress:
        progress.start(sum(len(names) for _, _, names in todo))
    with run_folder(writer.run_dir, manifest, writer) as live, earlier_objects_set_aside():
        machine = Fingerprint.of(manifest.environment).key
        peaks = roofline_peaks(
            device, sorted({case.dtype for case in cases}), request.roofline, machine
        )  # before timing
        live.record(roofline={dtype: dataclasses.asdict(p) for dtype, p in peaks.items()})
        # the reference workload, timed before the first case; no longer than a row's own minimum
        drift = DriftWatch(device, config.timing.noise_threshold, seconds=min(0.2, config.timing.min_run_time_s))
        run_cases(todo, device, writer, peaks, config, progress, drift)
        live.record(roofline={dtype: dataclasses.asdict(p) for dtype, p in peaks.items()})  # as corrected
        live.record(drift=drift.finish())
        warning = drift.result().warning()
    notes = (*covered_windows(config), *([warning] if warning else []))
    return RunResult(writer.run_dir, list(writer.rows), manifest, notes)


def open_run(
    config: RunConfig, out_root: Path, request: RunRequest, environment_fields: dict[str, Any], case_count: int
) -> tuple[RunWriter, Manifest]:
    """The run's writer and manifest: a new folder under ``out_root``, or the killed run ``request.resume_dir``
    reopened with a ``resumed`` entry (its own repeats then stand)."""
    argv, manifest_extra = list(request.argv), dict(request.manifest_extra)
    if request.resume_dir is not None:
        resume_dir = request.resume_dir
        return RunWriter.reopen(resume_dir), _resumed_manifest(resume_dir, argv, request.resume_differences)
    started = dt.datetime.now(dt.timezone.utc)
    writer = RunWriter(new_run_dir(out_root, _folder_name(config, manifest_extra), started))
    manifest = Manifest(
        command=argv,
        config=config.model_dump(mode="json"),
        environment=environment_fields,
        roofline={},
        cases=case_count,
        implementations=[s.name for s in implementations_of(config)],
        repeats=request.repeats,
        plugins=list(plugins.loaded_plugin_files()),  # --resume loads them again
        started_at=started.isoformat(),
        **manifest_extra,
    )
    return writer, manifest


def done_keys(writer: RunWriter) -> set[tuple[str, str, int]]:
    """(case, implementation, repeat) of every row the folder already holds."""
    return {(r.case.case_id, r.case.impl, r.case.repeat) for r in writer.rows}


def _resumed_manifest(run_dir: Path, argv: list[str] | None, differences: tuple[str, ...]) -> Manifest:
    """The killed run's manifest with a ``resumed`` entry: when, the command, what ``--force`` overrode, who."""
    manifest = Manifest.parse(read_manifest(run_dir), run_dir / MANIFEST_NAME)
    entry = {"at": now_iso(), "command": argv or [], "forced_differences": list(differences), **liveness_fields()}
    manifest.resumed = [*manifest.resumed, entry]
    return manifest


def _folder_name(config: RunConfig, manifest_extra: dict[str, Any] | None) -> str:
    """``<config name>``, with ``-shard-I-of-N`` for a shard (the same rule as under torchrun) and
    ``-replicate-I-of-N`` for one process of a replicated run."""
    extra = manifest_extra or {}
    return folder_name(config.name, extra.get("shard"), extra.get("replicate"))


Pending = tuple[int, Case, list[str]]
"""(repeat, case, names of the implementations still to measure in it)."""


def pending(
    cases: list[Case], specs: list[ImplSpec], repeats: int, select: Selector | None, done: set[tuple[str, str, int]]
) -> list[Pending]:
    """Every (repeat, case) with the implementations this run still has to measure, in run order."""
    todo = []
    for repeat in range(repeats):
        for case in cases:
            names = [
                spec.name
                for spec in specs
                if (case.case_id, spec.name, repeat) not in done and (select is None or select(case, spec.name, repeat))
            ]
            if names:
                todo.append((repeat, case, names))
    return todo


def roofline_peaks(
    device: torch.device,
    dtypes: list[str],
    known: Mapping[str, DevicePeaks] | None = None,
    machine: str | None = None,
) -> dict[str, DevicePeaks]:
    """The device's roofs per dtype: ``known`` ones (an earlier replicate's), datasheet figures, a CPU probe this
    ``machine`` (a fingerprint key) kept in the last hour (:mod:`mhabench.run.roof_record`), or probed here before
    the first case."""
    known = known or {}
    return {dtype: known[dtype] if dtype in known else own_peaks(device, dtype, machine) for dtype in dtypes}


def own_peaks(device: torch.device, dtype: str, machine: str | None) -> DevicePeaks:
    """A CPU's recent probe of ``dtype`` on this machine, else a new one (kept for the next runs); other devices'
    roofs as :func:`device_peaks` gives them."""
    if device.type != "cpu" or machine is None:
        return device_peaks(device, DTYPES[dtype])
    now = dt.datetime.now(dt.timezone.utc)
    recent = roof_record.recent_roof(machine, dtype, now)
    return recent if recent is not None else roof_record.kept(machine, dtype, device_peaks(device, DTYPES[dtype]), now)


def probed_again(device: torch.device, dtype: str) -> DevicePeaks:
    """A new measurement of the roof of ``dtype`` (the per-process one dropped); a datasheet's where it has one."""
    measured_peaks.cache_clear()
    return device_peaks(device, DTYPES[dtype])


def run_cases(
    todo: list[Pending],
    device: torch.device,
    writer: RunWriter,
    peaks: dict[str, DevicePeaks],
    config: RunConfig,
    progress: Progress | None,
    drift: DriftWatch,
) -> None:
    """Measure every pending case, appending each row to ``writer`` as soon as it exists.

    ``isolation: process`` runs each case in a child process. In process, a sticky CUDA error
    (illegal access, device-side assert) leaves this process unable to run anything on the GPU, so
    the rest of the sweep, the unfinished implementations of that case included, runs in children.
    """
    isolate = config.isolation == "process"
    roof = RoofCheck(peaks, lambda dtype: probed_again(device, dtype))  # updates ``peaks`` for the next cases
    for repeat, case, names in todo:
        drift.between_cases()
        counters = CounterSettings.of(config, writer.run_dir)
        rows = case_rows(case, names, device, writer.run_id, peaks[case.dtype], config, repeat, isolate, counters)
        done: set[str] = set()
        try:
            for row in rows:
                _record(writer, roof.checked(row), progress, done)
        except CudaContextLostError as lost:
            isolate = True
            drift.stop("this process lost its CUDA context; the rest of the run was measured in child processes")
            if lost.culprit is not None:  # its own error, once; the others of the case are measured without it
                _record(writer, roof.checked(lost.culprit), progress, done)
            rest = [name for name in names if name not in done]
            rerun = case_rows(case, rest, device, writer.run_id, peaks[case.dtype], config, repeat, True, counters)
            for row in rerun:
                _record(writer, roof.checked(row), progress, done)


def case_rows(
    case: Case,
    names: list[str],
    device: torch.device,
    run_id: str,
    peaks: DevicePeaks,
    config: RunConfig,
    repeat: int,
    isolate: bool,
    counters: CounterSettings | None = None,
) -> Iterator[ResultRow]:
    """The rows of one case, measured here or in a child process (``isolation: process``), with ``counters``
    as the case's last stage."""
    if not isolate:
        specs = [get_spec(name) for name in names]
        return run_case(
            case,
            specs,
            device,
            run_id,
            peaks,
            config.timing,
            repeat=repeat,
            guard=config.memory_guard,
            energy=config.energy,
            counters=counters,
        )
    setup = ChildSetup(allocator=config.allocator, threads=config.threads, plugin_files=plugins.loaded_plugin_files())
    job = CaseJob(
        case,
        names,
        canonical_device(device),
        run_id,
        peaks,
        config.timing,
        repeat,
        setup,
        config.memory_guard,
        config.energy,
        counters,
    )
    return isolated_case(job, config.case_timeout_s)


def _record(writer: RunWriter, row: ResultRow, progress: Progress | None, done: set[str]) -> None:
    writer.append(row)
    done.add(row.case.impl)
    if progress:
        progress.advance(f"{row.case.case_id} {row.case.impl}")


def plan(config: RunConfig, repeats: int = 1) -> list[ResultRow]:
    """``--dry-run``: every (case, implementation) with its modelled cost; nothing is run."""
    device = resolve_device(config.device)
    check_row_count(count_cases(config, device) * repeats, len(implementations_of(config)), config.max_rows)
    return [
        ResultRow(
            identity("dry-run", case, spec.name, device), Outcome(RowStatus.PLANNED, ""), cost=modelled_cost(spec, case)
        )
        for case in expand_cases(config, device)
        for spec in implementations_of(config)
    ]


def estimate(
    config: RunConfig, planned: list[ResultRow], repeats: int = 1, known_ms: Mapping[RowKey, float] | None = None
) -> RunEstimate:
    """``--dry-run``: how long the run of ``planned`` (:func:`plan`'s rows) will take on this machine: per-call
    times from ``known_ms`` (earlier runs) or the cost model on this device's roofs (probed here on a CPU)."""
    device = resolve_device(config.device)
    peaks = roofline_peaks(device, sorted({row.case.dtype for row in planned}))
    rows = [PlannedRow(row.case.case_id, row.case.impl, row.cost, peaks[row.case.dtype]) for row in planned]
    probed = any(p.source.startswith("measured") for p in peaks.values())
    return estimate_run(
        rows,
        config.timing,
        processes=config.replicates,
        repeats=repeats,
        known_ms=known_ms,
        probed=probed,
        forked=can_fork(device),
    )
