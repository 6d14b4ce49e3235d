"""``counters: hardware``: a case's ok rows get what the GPU's counters saw over one call of their step.

The case is measured as always; its ok rows are held back until it ends (its memory freed), then one child
process, started under ``ncu``, profiles one call of each ok implementation (:mod:`mhabench.run.profiled_call`).
The profile is cut into calls at the child's marker kernels (:mod:`mhabench.measure.hardware`), each row gets
its :class:`~mhabench.results.gpu_groups.HardwareCounters` and is placed on the roofline again (by the hardware
intensity where there is one), and the kernels go to the run's kernels.csv. No timed call is ever profiled: the
timing happened in this process, before the child existed. Failure rows pass through at once; every ok row
says in ``counters_source`` where its counters came from or why there are none.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch

from mhabench.impls.registry import get_spec
from mhabench.measure import hardware
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.results.kernels import append_kernels
from mhabench.results.schema import ResultRow
from mhabench.run.breakdown import counters_breakdown
from mhabench.run.case import CudaContextLostError, finished
from mhabench.run.profiled_call import ProfileJob
from mhabench.scenario import plugins
from mhabench.scenario.cases import Case
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import canonical_device

NOT_REQUESTED = "not requested"
CPU_DEVICE = "CPU device"
NO_NCU = "no ncu"
VERSION_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class Finished:
    """What a process run returned: exit code and both outputs."""

    returncode: int
    stdout: str
    stderr: str


ProcessRunner = Callable[[list[str], float], Finished]
"""Runs a command with a timeout; injectable so the tests need no ncu and no GPU."""


def run_process(command: list[str], timeout_s: float) -> Finished:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return Finished(-1, "", f"==ERROR== not finished after {timeout_s:g} s (case_timeout_s)")
    except OSError as exc:
        return Finished(-1, "", f"==ERROR== {exc}")
    return Finished(done.returncode, done.stdout, done.stderr)


@dataclasses.dataclass(frozen=True)
class Profile:
    """One case profiled: per implementation its counters (or the reason it has none), and the kernel lines."""

    counters: dict[str, HardwareCounters]
    kernels: list[dict[str, object]]


def unprofiled(reason: str) -> HardwareCounters:
    return HardwareCounters(counters_source=reason)


def profile_case(
    job: ProfileJob,
    rows: Sequence[ResultRow],
    flush_caches: bool,
    timeout_s: float,
    ncu: Path | None,
    runner: ProcessRunner = run_process,
) -> Profile:
    """Profile one call of each row's implementation in a child under ``ncu``; never raises for ncu's failures."""
    if ncu is None:
        return Profile({row.case.impl: unprofiled(NO_NCU) for row in rows}, [])
    version = hardware.ncu_version(runner([str(ncu), "--version"], VERSION_TIMEOUT_S).stdout)
    source = hardware.source_label(version, flush_caches)
    with tempfile.TemporaryDirectory(prefix="mhabench-ncu-") as folder:
        job_path, status_path = Path(folder) / "job.pickle", Path(folder) / "status.json"
        job_path.write_bytes(pickle.dumps(job))
        child = [sys.executable, "-m", "mhabench.run.profiled_call", str(job_path), str(status_path)]
        done = Finished(-1, "", "")
        for optional in (True, False):
            metrics = hardware.metrics_for(job.case.dtype, optional)
            done = runner(hardware.ncu_command(ncu, metrics, flush_caches, child), timeout_s)
            if done.returncode == 0 or not (optional and hardware.unknown_metric(done.stdout + done.stderr)):
                break
        status = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else None
    if done.returncode != 0 or status is None:
        reason = hardware.failure_reason(done.stdout + "\n" + done.stderr)
        return Profile({row.case.impl: unprofiled(reason) for row in rows}, [])
    return attribute(done.stdout, status, rows, source)


def attribute(output: str, status: list[dict[str, object]], rows: Sequence[ResultRow], source: str) -> Profile:
    """Each row's counters from ncu's CSV: the profile cut at the markers, call *i* to the *i*-th status entry."""
    try:
        calls = hardware.split_at_markers(hardware.parse_csv(output), len(status))
    except hardware.NcuOutputError as exc:
        return Profile({row.case.impl: unprofiled(f"ncu output not attributable: {exc}") for row in rows}, [])
    by_impl = {str(entry["impl"]): (entry.get("error"), kernels) for entry, kernels in zip(status, calls, strict=True)}
    counters: dict[str, HardwareCounters] = {}
    lines: list[dict[str, object]] = []
    for row in rows:
        impl = row.case.impl
        if impl not in by_impl:
            counters[impl] = unprofiled("not profiled: building or warming it up failed in the profiling process")
            continue
        error, kernels = by_impl[impl]
        if error:
            counters[impl] = unprofiled(f"profiled call failed: {error}")
            continue
        counted_bytes = row.counted.measured_bytes if row.counted is not None else None
        counters[impl] = hardware.counters_of(kernels, row.case.dtype, source, counted_bytes)
        key = {"case_id": row.case.case_id, "impl": impl, "repeat": row.case.repeat}
        lines += [{**key, **record} for record in hardware.kernel_records(kernels, row.case.dtype)]
    return Profile(counters, lines)


def with_counters(
    rows: Iterator[ResultRow],
    case: Case,
    device: torch.device,
    config: RunConfig,
    peaks: DevicePeaks,
    run_dir: Path,
) -> Iterator[ResultRow]:
    """The case's rows with their hardware columns: failure rows at once, ok rows once the case is profiled.

    Without ``counters: hardware``, or off CUDA, every ok row passes at once and says why it has no counters.
    """
    reason = NOT_REQUESTED if config.counters != "hardware" else CPU_DEVICE if device.type != "cuda" else None
    if reason is not None:
        for row in rows:
            yield row.with_groups(unprofiled(reason)) if row.status == "ok" else row
        return
    held: list[ResultRow] = []
    try:
        for row in rows:
            if row.status == "ok":
                held.append(row)
            else:
                yield row
    except CudaContextLostError:
        yield from (row.with_groups(unprofiled("not profiled: the CUDA context was lost")) for row in held)
        raise
    if not held:
        return
    torch.cuda.empty_cache()  # the case's layers are gone: give their cached blocks to the profiled child
    job = ProfileJob(
        case,
        tuple(row.case.impl for row in held),
        canonical_device(device),
        config.allocator,
        config.threads,
        plugins.loaded_plugin_files(),
    )
    profile = profile_case(job, held, config.timing.flush_l2, config.case_timeout_s, hardware.find_ncu())
    append_kernels(run_dir, profile.kernels)
    for row in held:
        groups = [profile.counters[row.case.impl]]
        mine = [line for line in profile.kernels if line["impl"] == row.case.impl]
        if mine:
            groups.append(counters_breakdown(mine, get_spec(row.case.impl), case))
        yield finished(row.with_groups(*groups), case, peaks)
