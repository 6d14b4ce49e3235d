"""Runs a config: expand cases, build every implementation on one weight set, check, time, measure.

Each finished row goes to disk at once (``results.RunWriter``). A failure in one implementation
(an exception, out of memory, a numerical mismatch) becomes a row with ``status`` and a one-line
``error``, and the sweep goes on.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import torch

from mhabench.config import DTYPES, Case, RunConfig, TimingConfig, expand_cases, resolve_device
from mhabench.environment import environment
from mhabench.errors import UnsupportedError
from mhabench.impls import core_implementations, get_spec
from mhabench.impls.registry import ImplSpec
from mhabench.measure.cost import Cost, estimate_cost
from mhabench.measure.hardware import DevicePeaks, device_name, device_peaks
from mhabench.measure.memory import LiveStorageTracker, peak_memory, sdpa_backend, tracker_method
from mhabench.measure.timing import Latency, measure_latency, synchronize
from mhabench.modes import input_len, parameter_count, prepare, reference_fn, workload
from mhabench.reference import TOLERANCE, numerical_error
from mhabench.results import RunWriter, new_run_dir, rows_frame
from mhabench.weights import AttentionWeights


class Progress(Protocol):
    """What the runner reports while it works (the CLI shows it as a rich progress bar)."""

    def start(self, total: int) -> None: ...

    def advance(self, label: str) -> None: ...


@dataclasses.dataclass(frozen=True)
class RunResult:
    run_dir: Path
    rows: pd.DataFrame


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
    references: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)

    def reference_for(self, spec: ImplSpec, case: Case) -> torch.Tensor:
        """The float64 output ``spec`` must reproduce (cached per reference function)."""
        fn = reference_fn(spec, case)
        if id(fn) not in self.references:
            self.references[id(fn)] = fn(self.weights, self.x, case.heads, case.causal)
        return self.references[id(fn)]


def make_inputs(case: Case, device: torch.device) -> CaseInputs:
    dtype = DTYPES[case.dtype]
    weights = AttentionWeights.random(
        case.d_model, bias=case.bias, seed=case.seed, dtype=dtype, device=device,
        kv_dim=case.kv_heads * case.head_dim,
    )  # fmt: skip
    generator = torch.Generator().manual_seed(case.seed + 1)
    x = torch.randn(case.batch, input_len(case), case.d_model, generator=generator, dtype=torch.float64)
    return CaseInputs(weights, x.to(dtype=dtype, device=device))


def identity_row(run_id: str, case: Case, impl: str, device: torch.device) -> dict[str, Any]:
    return {
        "run_id": run_id, "scenario": case.scenario, "case_id": case.case_id, "impl": impl,
        "device": str(device), "device_name": device_name(device), "dtype": case.dtype,
        "batch": case.batch, "seq_len": case.seq_len, "d_model": case.d_model, "heads": case.heads,
        "head_dim": case.head_dim, "kv_heads": case.kv_heads, "mode": case.mode, "phase": case.phase,
        "causal": case.causal, "bias": case.bias,
        "status": "ok", "error": "",
    }  # fmt: skip


def cost_columns(cost: Cost) -> dict[str, Any]:
    return {
        "flops": cost.flops, "useful_flops": cost.useful_flops, "softmax_flops": cost.softmax_flops,
        "proj_flops": cost.proj_flops, "attn_flops": cost.attn_flops,
        "bytes_moved": cost.bytes_moved, "proj_bytes": cost.proj_bytes, "attn_bytes": cost.attn_bytes,
        "arithmetic_intensity": cost.arithmetic_intensity, "proj_intensity": cost.proj_intensity,
        "attn_intensity": cost.attn_intensity, "predicted_peak_bytes": cost.predicted_peak_bytes,
        "backward_flops": cost.backward_flops,
    }  # fmt: skip


def performance_columns(case: Case, cost: Cost, latency: Latency, peaks: DevicePeaks) -> dict[str, Any]:
    latency_s = latency.median_ms / 1e3
    achieved_tflops = cost.flops / latency_s / 1e12
    attainable = peaks.attainable_tflops(cost.arithmetic_intensity)
    return {
        "latency_ms": latency.median_ms, "latency_p25_ms": latency.p25_ms,
        "latency_p75_ms": latency.p75_ms, "latency_mean_ms": latency.mean_ms,
        "samples": len(latency.times_ms), "calls_per_sample": latency.calls_per_sample,
        "noisy": latency.noisy, "times_ms": list(latency.times_ms),
        "tokens_per_s": workload(case).tokens / latency_s,
        "achieved_tflops": achieved_tflops, "achieved_gbps": cost.bytes_moved / latency_s / 1e9,
        "peak_tflops": peaks.peak_tflops, "peak_gbps": peaks.peak_gbps,
        "roofline_source": peaks.source, "roofline_bound": peaks.bound(cost.arithmetic_intensity),
        "attainable_tflops": attainable, "roofline_efficiency": achieved_tflops / attainable,
    }  # fmt: skip


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and "can't allocate memory" in str(exc)


def measure_impl(
    spec: ImplSpec, case: Case, inputs: CaseInputs, device: torch.device,
    peaks: Callable[[], DevicePeaks], timing: TimingConfig, row: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """Check ``spec`` against its float64 reference, then measure memory, cost and latency."""
    module, step = prepare(spec, case, inputs.weights, inputs.x)  # forward, decode or train (mhabench.modes)
    call = step.run
    row.update(params=parameter_count(module), **step.columns)
    output, tracker, row["compile_time_s"] = first_call(spec, call, device)
    max_abs_err, max_rel_err = numerical_error(output, inputs.reference_for(spec, case))
    del output
    backend = sdpa_backend(tracker.ops) if tracker else ""
    row.update(max_abs_err=max_abs_err, max_rel_err=max_rel_err, sdpa_backend=backend)
    cost = estimate_cost(spec.traffic, workload(case))
    row.update(cost_columns(cost))
    if max_rel_err > TOLERANCE[case.dtype]:
        row.update(
            status="mismatch", error=f"max_rel_err {max_rel_err:.3g} > {TOLERANCE[case.dtype]:g} vs float64 reference"
        )
        return row
    row["peak_memory_bytes"], row["memory_method"] = measure_memory(call, device, tracker)
    with torch.inference_mode():
        latency = measure_latency(call, device, timing)
    row.update(performance_columns(case, cost, latency, peaks()))
    return row


# torch.compile runs a frame eagerly while any TorchDispatchMode is active, so on the CPU the storage
# tracker would measure the eager module instead of the compiled graph: no number rather than a wrong one.
COMPILED_CPU_MEMORY = "not measured (CPU: torch.compile runs eagerly under the dispatch-mode tracker)"


def first_call(
    spec: ImplSpec, call: Callable[[], torch.Tensor], device: torch.device
) -> tuple[torch.Tensor, LiveStorageTracker | None, float]:
    """The call whose output is checked: ``(output, tracker, compile_time_s)``.

    Eager: under the storage tracker, which gives the CPU peak memory and the SDPA backend that ran.
    Compiling: this call compiles, so it is timed (compile time never reaches the latency); it runs
    under ``inference_mode`` like the timing loop, because another grad mode would compile a second
    graph; and outside the tracker, under which torch.compile would not run the compiled graph.
    """
    if spec.compiles:
        with torch.inference_mode():
            start_s = time.perf_counter()
            output = call()
            synchronize(device)
        return output, None, time.perf_counter() - start_s
    tracker = LiveStorageTracker()
    with torch.no_grad(), tracker:  # no_grad, not inference_mode: composite ops decompose visibly
        output = call()
    return output, tracker, math.nan


def measure_memory(
    call: Callable[[], torch.Tensor], device: torch.device, tracker: LiveStorageTracker | None
) -> tuple[float, str]:
    """``(peak_memory_bytes, memory_method)``; ``tracker`` is None for compiled modules."""
    if device.type == "cuda":
        with torch.inference_mode() if tracker is None else torch.no_grad():
            return peak_memory(call, device)
    if tracker is None:
        return math.nan, COMPILED_CPU_MEMORY
    return tracker.peak_bytes, tracker_method(tracker.ops)


def run_case(
    case: Case, specs: list[ImplSpec], device: torch.device, run_id: str,
    peaks: Callable[[], DevicePeaks], timing: TimingConfig,
) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Yield one row per implementation; failures become rows, never exceptions."""
    try:
        inputs = make_inputs(case, device)
    except Exception as exc:  # e.g. the input itself does not fit in memory
        for spec in specs:
            yield failure_row(identity_row(run_id, case, spec.name, device), exc)
        return
    for spec in specs:
        row = identity_row(run_id, case, spec.name, device)
        try:
            yield measure_impl(spec, case, inputs, device, peaks, timing, row)
        except Exception as exc:
            yield failure_row(row, exc)
        finally:
            if device.type == "cuda":
                torch.cuda.empty_cache()


def failure_row(row: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, UnsupportedError):  # cannot run on this device/dtype/shape: the reason, not a failure
        return {**row, "status": "unsupported", "error": str(exc).strip().splitlines()[0]}
    return {**row, "status": "oom" if is_out_of_memory(exc) else "error", "error": one_line(exc)}


# --- a whole run -------------------------------------------------------------------------------


def run(
    config: RunConfig, out_root: Path, progress: Progress | None = None, argv: list[str] | None = None
) -> RunResult:
    """Run every case of ``config``; write ``out_root/<run_id>/``; return the rows."""
    device = resolve_device(config.device)
    specs = implementations_of(config)
    cases = expand_cases(config, device)
    started = dt.datetime.now(dt.timezone.utc)
    writer = RunWriter(new_run_dir(out_root, config.name or "run", started))
    manifest = {
        "run_id": writer.run_id, "command": argv or [], "config": config.model_dump(mode="json"),
        "environment": environment(device), "roofline": {}, "cases": len(cases),
        "implementations": [s.name for s in specs], "started_at": started.isoformat(),
        "finished_at": None, "status": "running",
    }  # fmt: skip
    writer.write_manifest(manifest)
    if progress:
        progress.start(len(cases) * len(specs))
    try:
        run_cases(cases, specs, device, writer, manifest, config.timing, progress)
    except BaseException:  # Ctrl-C or a crash: the rows are on disk; say the run is incomplete
        manifest.update(finished_at=dt.datetime.now(dt.timezone.utc).isoformat(), status="interrupted")
        writer.write_manifest(manifest)
        raise
    manifest.update(finished_at=dt.datetime.now(dt.timezone.utc).isoformat(), status="complete")
    writer.write_manifest(manifest)
    return RunResult(writer.run_dir, rows_frame(writer.rows))


def run_cases(
    cases: list[Case], specs: list[ImplSpec], device: torch.device, writer: RunWriter,
    manifest: dict[str, Any], timing: TimingConfig, progress: Progress | None,
) -> None:  # fmt: skip
    """Measure every case, appending each row to ``writer`` as soon as it exists."""
    peaks_cache: dict[str, DevicePeaks] = {}
    for case in cases:

        def peaks(dtype: str = case.dtype) -> DevicePeaks:
            if dtype not in peaks_cache:
                peaks_cache[dtype] = device_peaks(device, DTYPES[dtype])
                manifest["roofline"][dtype] = dataclasses.asdict(peaks_cache[dtype])
            return peaks_cache[dtype]

        for row in run_case(case, specs, device, writer.run_id, peaks, timing):
            writer.append(row)
            if progress:
                progress.advance(f"{case.case_id} {row['impl']}")


def plan(config: RunConfig) -> pd.DataFrame:
    """``--dry-run``: every (case, implementation) with its predicted FLOPs, bytes and memory."""
    device = resolve_device(config.device)
    rows = []
    for case in expand_cases(config, device):
        for spec in implementations_of(config):
            cost = estimate_cost(spec.traffic, workload(case))
            rows.append({**identity_row("dry-run", case, spec.name, device), **cost_columns(cost)})
    return pd.DataFrame(rows)
