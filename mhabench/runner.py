"""Runs a config: expand cases, build every implementation on one weight set, check, time, measure.

Each finished row goes to disk at once (``results.RunWriter``). A case an implementation cannot
run (its registry capabilities say so) is an ``unsupported`` row before anything is built; a
failure (an exception, out of memory, a numerical mismatch) becomes a row with ``status`` and a
one-line ``error``, and the sweep goes on. Rows are :class:`mhabench.schema.ResultRow`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import pandas as pd
import torch

from mhabench.config import DTYPES, Case, RunConfig, TimingConfig, count_cases, expand_cases, resolve_device
from mhabench.environment import canonical_device, environment
from mhabench.errors import InputError, MhabenchError
from mhabench.failures import classify_failure, is_sticky_cuda_error
from mhabench.guard import check_row_count, fits
from mhabench.impls import core_implementations, get_spec
from mhabench.impls.registry import ImplSpec
from mhabench.liveness import heartbeat, liveness_fields
from mhabench.measure.allocator import apply_process_settings
from mhabench.measure.hardware import DevicePeaks, device_name, device_peaks
from mhabench.measure.timing import measure_latency
from mhabench.measure.trackers import CudaMemoryTracker, DispatchTracker, PeakMemory, Stopwatch
from mhabench.modes import expected, input_len, parameter_count, prepare, workload
from mhabench.reference import Reference, check_output, reference_bytes
from mhabench.results import RunWriter, new_run_dir, rows_frame
from mhabench.schema import (
    FORMAT_VERSION,
    SHAPE_FIELDS,
    CaseIdentity,
    Correctness,
    Dispatch,
    LatencyStats,
    Memory,
    ModelledCost,
    Outcome,
    ResultRow,
    Roofline,
)
from mhabench.weights import AttentionWeights


class Progress(Protocol):
    """What the runner reports while it works (the CLI shows it as a rich progress bar)."""

    def start(self, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


class CudaContextLostError(MhabenchError):
    """A sticky CUDA error: the process's CUDA context cannot run anything else."""


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    rows: list[ResultRow]

    @property
    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def implementations_of(config: RunConfig) -> list[ImplSpec]:
    """The registry entries a config asks for (its list, or every core implementation)."""
    names = config.implementations or core_implementations()
    return [get_spec(name) for name in names]


# --- one (case, implementation) ----------------------------------------------------------------


@dataclasses.dataclass
class CaseInputs:
    """What every implementation of one case shares: weights, input, and the float64 references."""

    weights: AttentionWeights
    x: torch.Tensor
    references: dict[object, Reference] = dataclasses.field(default_factory=dict)

    def reference_for(self, spec: ImplSpec, case: Case) -> Reference:
        """The float64 output ``spec`` must reproduce (cached per reference function)."""
        key = spec.reference if case.phase == "prefill" else None
        if key not in self.references:
            self.references[key] = expected(spec, case, self.weights, self.x)
        return self.references[key]


def make_inputs(case: Case, device: torch.device) -> CaseInputs:
    dtype = DTYPES[case.dtype]
    kv_dim = case.kv_heads * case.head_dim
    weights = AttentionWeights.random(case.d_model, case.bias, case.seed, dtype, device, kv_dim=kv_dim)
    generator = torch.Generator().manual_seed(case.seed + 1)
    x = torch.randn(case.batch, input_len(case), case.d_model, generator=generator, dtype=torch.float64)
    return CaseInputs(weights, x.to(dtype=dtype, device=device))


def identity(run_id: str, case: Case, impl: str, device: torch.device, repeat: int = 0) -> CaseIdentity:
    shape = {name: getattr(case, name) for name in SHAPE_FIELDS}
    return CaseIdentity(
        run_id=run_id, scenario=case.scenario, case_id=case.case_id, impl=impl, device=canonical_device(device),
        device_name=device_name(device), dtype=case.dtype, head_dim=case.head_dim, repeat=repeat, **shape,
    )  # fmt: skip


def modelled_cost(spec: ImplSpec, case: Case) -> ModelledCost | None:
    """The implementation's own cost model on this case; None when it declared none (a bare plugin)."""
    return ModelledCost.from_cost(spec.cost(workload(case))) if spec.cost else None


def unsupported_reason(spec: ImplSpec, case: Case, device: torch.device) -> str | None:
    """Why ``spec`` cannot run ``case`` here (its capabilities), or None."""
    return spec.capabilities.unsupported_reason(
        spec.name, kv_heads=case.kv_heads, heads=case.heads, phase=case.phase, mode=case.mode,
        device_type=device.type, dtype=case.dtype,
    )  # fmt: skip


def roofline(case: Case, cost: ModelledCost | None, latency: LatencyStats, peaks: DevicePeaks) -> Roofline:
    """Throughput from the measured median; FLOP and byte rates only where a cost model exists."""
    latency_s = latency.latency_ms / 1e3
    tokens_per_s = workload(case).tokens / latency_s
    if cost is None:
        return Roofline(tokens_per_s=tokens_per_s, peak_tflops=peaks.peak_tflops, peak_gbps=peaks.peak_gbps,
                        roofline_source=peaks.source)  # fmt: skip
    achieved_tflops = cost.flops / latency_s / 1e12
    attainable = peaks.attainable_tflops(cost.arithmetic_intensity)
    return Roofline(
        tokens_per_s=tokens_per_s, achieved_tflops=achieved_tflops, achieved_gbps=cost.bytes_moved / latency_s / 1e9,
        peak_tflops=peaks.peak_tflops, peak_gbps=peaks.peak_gbps, roofline_source=peaks.source,
        roofline_bound=peaks.bound(cost.arithmetic_intensity), attainable_tflops=attainable,
        roofline_efficiency=achieved_tflops / attainable,
    )  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CheckedCall:
    """What the checked (first) call produced besides its output."""

    dispatch: Dispatch
    cpu_memory: PeakMemory | None
    """None for a compiling implementation: torch.compile runs eagerly under a dispatch mode."""
    compile_time_s: float


def checked_call(
    spec: ImplSpec, call: Callable[[], torch.Tensor], device: torch.device
) -> tuple[torch.Tensor, CheckedCall]:
    """The call whose output is checked against the reference.

    Eager: under the dispatch tracker, which gives the CPU peak memory and the SDPA backend that ran
    (``no_grad``, not ``inference_mode``, so composite ops decompose visibly). Compiling: this call
    compiles, so it is timed as ``compile_time_s`` (never part of the latency), under
    ``inference_mode`` like the timing loop (another grad mode would compile a second graph), and
    outside the dispatch tracker, under which torch.compile would not run the compiled graph.
    """
    if spec.compiles:
        with torch.inference_mode(), Stopwatch(device) as watch:
            output = call()
        return output, CheckedCall(Dispatch(), None, watch.seconds)
    with torch.no_grad(), DispatchTracker() as tracker:
        output = call()
    return output, CheckedCall(tracker.result(), tracker.cpu_memory(), math.nan)


# torch.compile runs a frame eagerly while any TorchDispatchMode is active, so on the CPU the storage
# tracker would measure the eager module instead of the compiled graph: no number rather than a wrong one.
COMPILED_CPU_MEMORY = "not measured (CPU: torch.compile runs eagerly under the dispatch-mode tracker)"


def peak_memory(call: Callable[[], torch.Tensor], device: torch.device, checked: CheckedCall) -> PeakMemory:
    """CUDA: one more call under the allocator tracker. CPU: the checked call's storage peak."""
    if device.type == "cuda":
        with torch.inference_mode() if checked.cpu_memory is None else torch.no_grad(), CudaMemoryTracker(device) as m:
            call()
        return m.result()
    return checked.cpu_memory or PeakMemory(math.nan, COMPILED_CPU_MEMORY)


def measure_impl(
    spec: ImplSpec, case: Case, inputs: CaseInputs, device: torch.device,
    peaks: Callable[[], DevicePeaks], timing: TimingConfig, case_identity: CaseIdentity,
) -> ResultRow:  # fmt: skip
    """Check ``spec`` against its float64 reference, then measure memory and latency."""
    module, step = prepare(spec, case, inputs.weights, inputs.x)  # forward, decode or train (mhabench.modes)
    output, checked = checked_call(spec, step.run, device)
    check = check_output(output, inputs.reference_for(spec, case), case.dtype)
    del output
    correctness = Correctness(check.max_abs_err, check.max_rel_err)
    dispatch, cost = checked.dispatch, modelled_cost(spec, case)
    if not check.ok:  # NaN/Inf, or past the tolerance: reported, never timed
        return ResultRow(case_identity, Outcome("mismatch", check.reason), correctness, dispatch, cost=cost)
    memory = peak_memory(step.run, device, checked)
    with torch.inference_mode():
        latency = measure_latency(step.run, device, timing, checked.compile_time_s)
    return ResultRow(
        case_identity, Outcome("ok", ""), correctness, dispatch, latency=latency,
        memory=Memory(memory.peak_bytes, memory.method, parameter_count(module), step.kv_cache_bytes),
        cost=cost, roofline=roofline(case, cost, latency, peaks()),
    )  # fmt: skip


def run_case(
    case: Case, specs: list[ImplSpec], device: torch.device, run_id: str,
    peaks: Callable[[], DevicePeaks], timing: TimingConfig,
) -> Iterator[ResultRow]:  # fmt: skip
    """Yield one row per implementation; failures become rows, never exceptions."""
    runnable = {spec.name: unsupported_reason(spec, case, device) for spec in specs}
    too_big = {spec.name: memory_guard(spec, case, device) for spec in specs if runnable[spec.name] is None}
    runnable |= {name: reason for name, reason in too_big.items() if reason is not None}
    try:
        inputs = make_inputs(case, device) if any(reason is None for reason in runnable.values()) else None
    except Exception as exc:  # e.g. the input itself does not fit in memory
        for spec in specs:
            yield failure_row(identity(run_id, case, spec.name, device), exc)
        return
    for spec in specs:
        case_identity = identity(run_id, case, spec.name, device)
        reason = runnable[spec.name]
        if reason is not None or inputs is None:
            status = "skipped" if too_big.get(spec.name) else "unsupported"
            yield ResultRow(case_identity, Outcome(status, reason or ""))
            continue
        try:
            yield measure_impl(spec, case, inputs, device, peaks, timing, case_identity)
        except Exception as exc:
            yield failure_row(case_identity, exc)
            if is_sticky_cuda_error(exc):  # the CUDA context is unusable: nothing after this can run
                raise CudaContextLostError(
                    f"not run: an earlier CUDA error left the context unusable ({exc})"
                ) from None
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()


def memory_guard(spec: ImplSpec, case: Case, device: torch.device) -> str | None:
    """A case that would not fit (its predicted peak, or the float64 reference's) is skipped, not tried."""
    predicted = spec.cost(workload(case)).predicted_peak_bytes if spec.cost else 0
    return fits(predicted, reference_bytes(workload(case)), device, reference_device=device)


def failure_row(case_identity: CaseIdentity, exc: BaseException) -> ResultRow:
    """Identity and outcome only: a failure has no measurements to report."""
    return ResultRow(case_identity, Outcome(*classify_failure(exc)))


# --- a whole run -------------------------------------------------------------------------------


def run(
    config: RunConfig, out_root: Path, progress: Progress | None = None, argv: list[str] | None = None
) -> RunResult:
    """Run every case of ``config``; write ``out_root/<run_id>/``; return the rows."""
    device = resolve_device(config.device)
    specs = implementations_of(config)
    check_row_count(count_cases(config, device), len(specs), config.max_rows)
    cases = expand_cases(config, device)
    refuse_unapplied_settings(config, cases)
    process = apply_process_settings(config.allocator, config.threads)  # before any case allocates
    if device.type == "cuda":
        # with an explicit index (torch 2.11 refuses a bare "cuda"), so every kernel targets cuda:N
        torch.cuda.set_device(torch.device(canonical_device(device)))
    started = dt.datetime.now(dt.timezone.utc)
    writer = RunWriter(new_run_dir(out_root, config.name or "run", started))
    manifest = {
        "run_id": writer.run_id, "format_version": FORMAT_VERSION, "command": argv or [],
        "config": config.model_dump(mode="json"), "environment": {**environment(device), **process}, "roofline": {},
        "cases": len(cases), "implementations": [s.name for s in specs], "started_at": started.isoformat(),
        "finished_at": None, "status": "running", **liveness_fields(),
    }  # fmt: skip
    writer.write_manifest(manifest)
    writer.on_row = lambda: writer.write_manifest({**manifest, **heartbeat()})  # liveness for readers
    if progress:
        progress.start(len(cases) * len(specs))
    try:
        peaks = roofline_peaks(device, sorted({case.dtype for case in cases}))  # before any case is timed
        manifest["roofline"] = {dtype: dataclasses.asdict(p) for dtype, p in peaks.items()}
        writer.write_manifest(manifest)
        run_cases(cases, specs, device, writer, peaks, config.timing, progress)
    except BaseException:  # Ctrl-C or a crash: the rows are on disk; say the run is incomplete
        writer.close()
        manifest.update(finished_at=dt.datetime.now(dt.timezone.utc).isoformat(), status="interrupted")
        writer.write_manifest(manifest)
        raise
    writer.close()
    manifest.update(finished_at=dt.datetime.now(dt.timezone.utc).isoformat(), status="complete")
    writer.write_manifest(manifest)
    return RunResult(writer.run_dir, list(writer.rows))


def refuse_unapplied_settings(config: RunConfig, cases: list[Case]) -> None:
    """Settings the config accepts that this runner cannot honour yet: one line, never silently ignored."""
    if config.isolation != "inprocess":
        raise InputError("isolation: 'process' is not applied by this runner yet; use isolation: inprocess")
    split = sorted({case.tensor_parallel for case in cases if case.tensor_parallel > 1})
    if split:
        raise InputError(f"tensor_parallel: {split} is not run by this runner yet (only 1); see docs/distributed.md")


def roofline_peaks(device: torch.device, dtypes: list[str]) -> dict[str, DevicePeaks]:
    """The device's roofs per dtype: datasheet figures, or probed here before the first case."""
    return {dtype: device_peaks(device, DTYPES[dtype]) for dtype in dtypes}


def run_cases(
    cases: list[Case], specs: list[ImplSpec], device: torch.device, writer: RunWriter,
    peaks: dict[str, DevicePeaks], timing: TimingConfig, progress: Progress | None,
) -> None:  # fmt: skip
    """Measure every case, appending each row to ``writer`` as soon as it exists.

    After a sticky CUDA error (illegal access, device-side assert) every remaining (case,
    implementation) gets an ``error`` row saying why it was not run, rather than failing one by one.
    """
    lost: str | None = None
    for case in cases:
        done: set[str] = set()
        try:
            if lost is None:
                for row in run_case(case, specs, device, writer.run_id, lambda c=case: peaks[c.dtype], timing):
                    _record(writer, row, progress, done)
        except CudaContextLostError as exc:
            lost = str(exc)
        for spec in specs:
            if spec.name not in done and lost is not None:
                row = ResultRow(identity(writer.run_id, case, spec.name, device), Outcome("error", lost[:300]))
                _record(writer, row, progress, done)


def _record(writer: RunWriter, row: ResultRow, progress: Progress | None, done: set[str]) -> None:
    writer.append(row)
    done.add(row.case.impl)
    if progress:
        progress.advance(f"{row.case.case_id} {row.case.impl}")


def plan(config: RunConfig) -> list[ResultRow]:
    """``--dry-run``: every (case, implementation) with its modelled cost; nothing is run."""
    device = resolve_device(config.device)
    check_row_count(count_cases(config, device), len(implementations_of(config)), config.max_rows)
    return [
        ResultRow(identity("dry-run", case, spec.name, device), Outcome("planned", ""), cost=modelled_cost(spec, case))
        for case in expand_cases(config, device)
        for spec in implementations_of(config)
    ]
