"""``counters: hardware``: a case's ok rows get what the GPU's counters saw over one call of their step.

The last stage of :func:`mhabench.run.case.run_case`: once the case's rounds are over and its layers freed, one
child process, started under ``ncu``, profiles one call of each ok implementation
(:mod:`mhabench.run.ncu_child`). By default each call is replayed whole (``counters_replay: range``: one
result per call, caches flushed once per call as the timing does); ``kernel`` replays kernel by kernel and cuts
the profile into calls at the child's marker kernels, keeping each kernel for kernels.csv. A range replay that
ncu refuses (an API it cannot replay inside a range) is profiled again by kernel, and says so. No timed call is
ever profiled: the timing happened in the parent, before the child existed. Every ok row says in
``counters_source`` where its counters came from or why there are none.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from mhabench.impls.registry import available_implementations, get_spec
from mhabench.measure import nsight
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.results.kernels import append_kernels
from mhabench.results.schema import ResultRow
from mhabench.run.breakdown import counters_breakdown
from mhabench.run.ncu_child import ProfileJob
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
    fp32: bool = False,
) -> Profile:
    """Profile one call of each row's implementation in a child under ``ncu``; never raises for ncu's failures.

    ``job.replay`` first; a range replay that fails for another reason than permission is tried again by kernel
    (``counters_source`` then says why)."""
    if ncu is None:
        return Profile({row.case.impl: unprofiled(NO_NCU) for row in rows}, [])
    version = nsight.ncu_version(runner([str(ncu), "--version"], VERSION_TIMEOUT_S).stdout)
    replays = [job.replay, nsight.KERNEL] if job.replay == nsight.RANGE else [job.replay]
    refused = ""
    for replay in replays:
        done, status = _profiled_child(
            dataclasses.replace(job, replay=replay), flush_caches, timeout_s, ncu, runner, fp32
        )
        output = done.stdout + "\n" + done.stderr
        if done.returncode == 0 and status is not None:
            source = nsight.source_label(version, flush_caches, replay)
            if refused:
                source += f" (range replay failed: {refused})"
            return attribute(done.stdout, status, rows, source, replay)
        refused = nsight.failure_reason(output)
        if nsight.PERMISSION_ERROR in output:
            break
    return Profile({row.case.impl: unprofiled(refused) for row in rows}, [])


def _profiled_child(
    job: ProfileJob, flush_caches: bool, timeout_s: float, ncu: Path, runner: ProcessRunner, fp32: bool
) -> tuple[Finished, list[dict[str, object]] | None]:
    """The child under ncu by ``job.replay``: with the optional metrics, then (when ncu refused a metric name)
    with the checked ones only; what ncu returned and the child's status, None where it wrote none."""
    with tempfile.TemporaryDirectory(prefix="mhabench-ncu-") as folder:
        job_path, status_path = Path(folder) / "job.pickle", Path(folder) / "status.json"
        job_path.write_bytes(pickle.dumps(job))
        child = [sys.executable, "-m", "mhabench.run.ncu_child", str(job_path), str(status_path)]
        done = Finished(-1, "", "")
        for optional in (True, False):
            metrics = nsight.metrics_for(job.case.dtype, optional, fp32)
            done = runner(nsight.ncu_command(ncu, metrics, flush_caches, child, job.replay), timeout_s)
            if done.returncode == 0 or not (optional and nsight.unknown_metric(done.stdout + done.stderr)):
                break
        status = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else None
    return done, status


def attribute(
    output: str,
    status: list[dict[str, object]],
    rows: Sequence[ResultRow],
    source: str,
    replay: str = nsight.KERNEL,
) -> Profile:
    """Each row's counters from ncu's CSV: call *i* to the *i*-th status entry (kernel replay: the profile cut
    at the markers, each kernel kept for kernels.csv; range replay: one result per call)."""
    per_kernel = replay == nsight.KERNEL
    try:
        results = nsight.parse_csv(output)
        calls = (
            nsight.split_at_markers(results, len(status)) if per_kernel else nsight.split_ranges(results, len(status))
        )
    except nsight.NcuOutputError as exc:
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
        dtype, note = tensor_dtype(impl, row.case.dtype)
        counters[impl] = nsight.counters_of(kernels, dtype, source + note, counted_bytes, per_kernel)
        if per_kernel:
            key = {"case_id": row.case.case_id, "impl": impl, "repeat": row.case.repeat}
            lines += [{**key, **record} for record in nsight.kernel_records(kernels, dtype)]
    return Profile(counters, lines)


def tensor_dtype(impl: str, case_dtype: str) -> tuple[str, str]:
    """The dtype whose tensor-core counter counts ``impl``'s FLOPs, and a note for ``counters_source`` where none
    is known: ``fused_fp8`` computes in e4m3 inside a bf16 case, so the bf16 counter would read its FLOPs as 0,
    a measured zero that is no measurement; its ``tensor_flops`` stay empty until an fp8 counter is checked on a
    GPU (docs/gpu.md)."""
    compute = get_spec(impl).compute_dtype if impl in available_implementations() else None
    if compute is None:
        return case_dtype, ""
    if compute in nsight.TENSOR_METRICS:
        return compute, ""
    return compute, f", no {compute} tensor counter checked: tensor_flops not read"


@dataclasses.dataclass(frozen=True)
class CounterSettings:
    """What ``counters: hardware`` asks of a case, in picklable form (an isolated case's child profiles its own
    rows, and appends their kernels to the run's kernels.csv)."""

    requested: bool
    run_dir: Path | None = None
    replay: str = nsight.RANGE
    fp32: bool = False
    flush_caches: bool = True
    timeout_s: float = 600.0
    allocator: str = "steady"
    threads: int | None = None

    @classmethod
    def of(cls, config: RunConfig, run_dir: Path) -> CounterSettings:
        return cls(
            requested=config.counters == "hardware",
            run_dir=run_dir,
            replay=config.counters_replay,
            fp32=config.counters_fp32,
            flush_caches=config.timing.flush_l2,
            timeout_s=config.case_timeout_s,
            allocator=config.allocator,
            threads=config.threads,
        )


def case_counters(
    case: Case, rows: Sequence[ResultRow], device: torch.device, settings: CounterSettings
) -> dict[str, list[object]]:
    """Per ok row's implementation, the groups it gains: its hardware columns (or only why it has none: not
    requested, CPU device) and, under kernel replay, its breakdown by stage from its kernels.

    Called by ``run_case`` once the case's layers are freed: their cached blocks go back to the driver first,
    for the profiled child to use."""
    reason = NOT_REQUESTED if not settings.requested else CPU_DEVICE if device.type != "cuda" else None
    if reason is not None or not rows:
        return {row.case.impl: [unprofiled(reason or NOT_REQUESTED)] for row in rows}
    torch.cuda.empty_cache()
    job = ProfileJob(
        case,
        tuple(row.case.impl for row in rows),
        canonical_device(device),
        settings.allocator,
        settings.threads,
        plugins.loaded_plugin_files(),
        settings.replay,
    )
    profile = profile_case(job, rows, settings.flush_caches, settings.timeout_s, nsight.find_ncu(), fp32=settings.fp32)
    if settings.run_dir is not None:
        append_kernels(settings.run_dir, profile.kernels)
    return {row.case.impl: _groups(row.case.impl, profile, case) for row in rows}


def _groups(impl: str, profile: Profile, case: Case) -> list[object]:
    """``impl``'s counters and, where ncu kept its kernels (kernel replay), its breakdown by stage from them."""
    mine = [line for line in profile.kernels if line["impl"] == impl]
    if not mine:
        return [profile.counters[impl]]
    return [profile.counters[impl], counters_breakdown(mine, get_spec(impl), case)]
