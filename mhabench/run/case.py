"""One case: build every implementation on one weight set, check each, then time them together.

Per case, in order:

1. capabilities and the memory guard decide, before anything is built, which implementations get an
   ``unsupported`` or ``skipped`` row;
2. each remaining implementation is built and its first call is checked against the float64
   reference, under the dispatch tracker (which SDPA backend ran, ops per call, counted FLOPs and
   bytes, the CPU peak); its peak memory is measured; a failure or a mismatch is a row at once;
3. every implementation that passed is timed in the same interleaved rounds
   (:func:`mhabench.measure.rounds.interleaved_latency`), so sample *i* of each comes from round *i*
   and a speedup can be a median of per-round ratios;
4. the ok rows follow, each with its roofline.

Rows are :class:`mhabench.results.schema.ResultRow`; failures become rows, never exceptions, except a sticky
CUDA error, after which nothing in this process can run (:class:`CudaContextLostError`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator

import torch

from mhabench.errors import MhabenchError
from mhabench.impls.reference import Reference, check_output, reference_bytes
from mhabench.impls.registry import ImplSpec
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.counters import OpCounts, count_cuda_kernels, counted
from mhabench.measure.peaks import DevicePeaks, device_name
from mhabench.measure.rounds import interleaved_latency
from mhabench.measure.timing import measure_latency
from mhabench.measure.trackers import CudaMemoryTracker, DispatchTracker, PeakMemory, Stopwatch
from mhabench.results.schema import (
    SHAPE_FIELDS,
    CaseIdentity,
    Correctness,
    Counted,
    Dispatch,
    LatencyStats,
    Memory,
    ModelledCost,
    Outcome,
    ResultRow,
    Roofline,
)
from mhabench.run.memory_guard import fits
from mhabench.run.steps import Step, expected, input_len, parameter_count, prepare, workload
from mhabench.scenario.config import DTYPES, Case, TimingConfig
from mhabench.scenario.device import canonical_device
from mhabench.torch_errors import classify_failure, is_sticky_cuda_error


class CudaContextLostError(MhabenchError):
    """A sticky CUDA error: the process's CUDA context cannot run anything else.

    ``culprit`` is the failure row of the implementation whose call raised it, when that is known
    (its checked call); None when the error came out of the case's shared timing rounds.
    """

    def __init__(self, message: str, culprit: ResultRow | None = None) -> None:
        super().__init__(message)
        self.culprit = culprit


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
    """The case's weights (drawn on the host, so every device sees the same numbers) and its input.

    The input is drawn where it runs, in float32, from the case's seed: at b = 8, n = 16k,
    d_model = 4096 a float64 draw on the host would take 4.3 GB of RAM and seconds of one core.
    """
    dtype = DTYPES[case.dtype]
    weights = case_weights(case.d_model, case.bias, case.seed, dtype, device, case.kv_heads * case.head_dim)
    generator = torch.Generator(device=device).manual_seed(case.seed + 1)
    shape = (case.batch, input_len(case), case.d_model)
    x = torch.randn(shape, generator=generator, dtype=torch.float32, device=device)
    return CaseInputs(weights, x.to(dtype=dtype))


@functools.lru_cache(maxsize=1)
def case_weights(
    d_model: int, bias: bool, seed: int, dtype: torch.dtype, device: torch.device, kv_dim: int
) -> AttentionWeights:
    """The weight set of the last case, reused while the next cases ask for the same one.

    A sweep's consecutive cases usually differ only in batch, length or mask, and a d_model = 4096
    set takes 1–2 s of one host core to draw in float64: longer than many cases' timed calls. No
    implementation may write to the weights (docs/plugins.md): modules copy or alias them, train
    steps take gradients with ``torch.autograd.grad``, so a reused set holds the numbers of a fresh draw.
    """
    return AttentionWeights.random(d_model, bias, seed, dtype, device, kv_dim=kv_dim)


def identity(run_id: str, case: Case, impl: str, device: torch.device, repeat: int = 0) -> CaseIdentity:
    shape = {name: getattr(case, name) for name in SHAPE_FIELDS}
    return CaseIdentity(
        run_id=run_id,
        scenario=case.scenario,
        case_id=case.case_id,
        impl=impl,
        device=canonical_device(device),
        device_name=device_name(device),
        dtype=case.dtype,
        head_dim=case.head_dim,
        repeat=repeat,
        **shape,
    )


def modelled_cost(spec: ImplSpec, case: Case) -> ModelledCost | None:
    """The implementation's own cost model on this case; None when it declared none (a bare plugin)."""
    return ModelledCost.from_cost(spec.cost(workload(case))) if spec.cost else None


def unsupported_reason(spec: ImplSpec, case: Case, device: torch.device) -> str | None:
    """Why ``spec`` cannot run ``case`` here (its capabilities), or None."""
    return spec.capabilities.unsupported_reason(
        spec.name,
        kv_heads=case.kv_heads,
        heads=case.heads,
        phase=case.phase,
        mode=case.mode,
        device_type=device.type,
        dtype=case.dtype,
    )


def memory_guard(spec: ImplSpec, case: Case, device: torch.device) -> str | None:
    """A case that would not fit (its predicted peak, or the float64 reference's) is skipped, not tried."""
    predicted = spec.cost(workload(case)).predicted_peak_bytes if spec.cost else 0
    return fits(predicted, reference_bytes(workload(case)), device, reference_device=device)


def roofline(
    case: Case,
    cost: ModelledCost | None,
    counts: Counted | None,
    latency: LatencyStats,
    peaks: DevicePeaks,
    skips_masked_work: bool,
) -> Roofline:
    """Throughput from the measured median, placed by the counted intensity where it exists, else the model's."""
    latency_s = latency.latency_ms / 1e3
    base = Roofline(
        tokens_per_s=workload(case).tokens / latency_s,
        peak_tflops=peaks.peak_tflops,
        peak_gbps=peaks.peak_gbps,
        roofline_source=peaks.source,
        skips_masked_work=skips_masked_work,
    )
    # counted where they describe the call; not when an opaque op (a custom kernel) hid part of it and the
    # implementation has a model (``counted`` then leaves the disagreement empty)
    hidden = counts is not None and cost is not None and counts.model_disagreement is None
    if counts is not None and counts.measured_bytes and not hidden:
        flops, moved, source = counts.measured_flops, counts.measured_bytes, "measured"
    elif cost is not None:
        flops, moved, source = cost.flops, cost.bytes_moved, "modelled"
    else:
        return base
    intensity = flops / moved
    achieved_tflops = flops / latency_s / 1e12
    attainable = peaks.attainable_tflops(intensity)
    useful = cost.useful_flops / latency_s / 1e12 if cost is not None else None
    # a kernel that skips masked blocks never executes the full n² FLOPs: judged on the useful ones,
    # or a causal row would read up to 2× its real efficiency (above 1 on an H200)
    judged = useful if skips_masked_work and useful is not None else achieved_tflops
    return dataclasses.replace(
        base,
        achieved_tflops=achieved_tflops,
        achieved_gbps=moved / latency_s / 1e9,
        roofline_bound=peaks.bound(intensity),
        attainable_tflops=attainable,
        roofline_efficiency=judged / attainable,
        intensity_source=source,
        achieved_useful_tflops=useful,
    )


# --- the checked call --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CheckedCall:
    """What the checked (first) call produced besides its output."""

    dispatch: Dispatch
    counts: OpCounts | None
    """None for a compiling implementation (see below)."""
    cpu_memory: PeakMemory | None
    """None for a compiling implementation: torch.compile runs eagerly under a dispatch mode."""
    compile_time_s: float


def checked_call(
    spec: ImplSpec, call: Callable[[], torch.Tensor], device: torch.device
) -> tuple[torch.Tensor, CheckedCall]:
    """The call whose output is checked against the reference.

    Eager: under the dispatch tracker, which gives the CPU peak memory, the SDPA backend that ran and
    the counted FLOPs and bytes (``no_grad``, not ``inference_mode``, so composite ops decompose
    visibly). Compiling: this call compiles, so it is timed as ``compile_time_s`` (never part of the
    latency), under ``inference_mode`` like the timing loop (another grad mode would compile a second
    graph), and outside the dispatch tracker, under which torch.compile would not run the compiled graph.
    """
    if spec.compiles:
        with torch.inference_mode(), Stopwatch(device) as watch:
            output = call()
        return output, CheckedCall(Dispatch(), None, None, watch.seconds)
    with torch.no_grad(), DispatchTracker() as tracker:
        output = call()
    return output, CheckedCall(tracker.result(), tracker.counts(), tracker.cpu_memory(), math.nan)


# torch.compile runs a frame eagerly while any TorchDispatchMode is active, so on the CPU the storage
# tracker would measure the eager module instead of the compiled graph: no number rather than a wrong one.
COMPILED_CPU_MEMORY = "not measured (CPU: torch.compile runs eagerly under the dispatch-mode tracker)"


def device_call(
    spec: ImplSpec,
    call: Callable[[], torch.Tensor],
    device: torch.device,
    checked: CheckedCall,
    count_kernels: bool = True,
) -> tuple[PeakMemory, int | None]:
    """Peak memory and kernels per call (None: not counted).

    CUDA: one more call, under the allocator tracker and, for an eager implementation when
    ``count_kernels``, the profiler, which allocates nothing on the device (one call for both: at
    n = 16k some calls take a third of a second). CPU: the checked call's storage peak, no kernels.
    """
    if device.type != "cuda":
        return checked.cpu_memory or PeakMemory(math.nan, COMPILED_CPU_MEMORY), None
    kernels = None
    with torch.inference_mode() if spec.compiles else torch.no_grad(), CudaMemoryTracker(device) as memory:
        if count_kernels and not spec.compiles:  # a compiled graph is timed, not profiled
            kernels = count_cuda_kernels(call, device)
        else:
            call()
    return memory.result(), kernels


@dataclasses.dataclass(frozen=True)
class Checked:
    """An implementation that passed its check: everything but the latency, and the call to time."""

    spec: ImplSpec
    step: Step
    identity: CaseIdentity
    correctness: Correctness
    dispatch: Dispatch
    counts: Counted | None
    memory: Memory
    cost: ModelledCost | None
    compile_time_s: float


def check_impl(
    spec: ImplSpec, case: Case, inputs: CaseInputs, device: torch.device, ident: CaseIdentity
) -> Checked | ResultRow:
    """Build ``spec``, check its first call against the float64 reference, measure its memory.

    Returns a ``mismatch`` row when the output is off (NaN/Inf included), else what timing needs.
    """
    module, step = prepare(spec, case, inputs.weights, inputs.x)  # forward, decode or train (mhabench.run.steps)
    output, checked = checked_call(spec, step.run, device)
    check = check_output(output, inputs.reference_for(spec, case), case.dtype)
    del output
    correctness = Correctness(check.max_abs_err, check.max_rel_err)
    cost = modelled_cost(spec, case)
    memory, kernels = device_call(spec, step.run, device, checked)
    dispatch = dataclasses.replace(checked.dispatch, kernels_per_call=kernels)
    counts = counted(checked.counts, cost) if checked.counts is not None else None
    if not check.ok:  # reported, never timed
        return ResultRow(ident, Outcome("mismatch", check.reason), correctness, dispatch, cost=cost, counted=counts)
    return Checked(
        spec,
        step,
        ident,
        correctness,
        dispatch,
        counts,
        Memory(memory.peak_bytes, memory.method, parameter_count(module), step.kv_cache_bytes),
        cost,
        checked.compile_time_s,
    )


# --- a case ------------------------------------------------------------------------------------


def run_case(
    case: Case,
    specs: list[ImplSpec],
    device: torch.device,
    run_id: str,
    peaks: DevicePeaks,
    timing: TimingConfig,
    *,
    repeat: int = 0,
    guard: bool = True,
) -> Iterator[ResultRow]:
    """Yield one row per implementation: failures as they happen, then the ok rows after the rounds.

    ``guard``: skip what would not fit (``memory_guard``); off, such a case is tried and may be ``oom``.
    """
    runnable = {spec.name: unsupported_reason(spec, case, device) for spec in specs}
    guarded = [spec for spec in specs if guard and runnable[spec.name] is None]
    too_big = {spec.name: memory_guard(spec, case, device) for spec in guarded}
    runnable |= {name: reason for name, reason in too_big.items() if reason is not None}
    inputs, input_error = None, None
    try:
        inputs = make_inputs(case, device) if any(reason is None for reason in runnable.values()) else None
    except Exception as exc:  # e.g. the input itself does not fit in memory: the runnable rows say so
        input_error = exc
    passed: list[Checked] = []
    for spec in specs:
        ident = identity(run_id, case, spec.name, device, repeat)
        reason = runnable[spec.name]
        if reason is not None:
            yield ResultRow(ident, Outcome("skipped" if too_big.get(spec.name) else "unsupported", reason))
            continue
        if input_error is not None:  # drawing the input failed: every runnable row says why
            yield failure_row(ident, input_error)
            continue
        assert inputs is not None
        try:
            with _failures_as_rows(device) as failed:
                result = check_impl(spec, case, inputs, device, ident)
                if isinstance(result, ResultRow):
                    yield result
                else:
                    passed.append(result)
        except CudaContextLostError as lost:
            raise CudaContextLostError(str(lost), failure_row(ident, lost.__context__ or lost)) from None
        if failed:
            yield failure_row(ident, failed[0])
    yield from timed_rows(passed, case, device, peaks, timing)


def timed_rows(
    passed: list[Checked], case: Case, device: torch.device, peaks: DevicePeaks, timing: TimingConfig
) -> Iterator[ResultRow]:
    """Time every checked implementation in the same interleaved rounds; one ok row each.

    When the shared rounds fail (one call raised, or could not be captured in a CUDA graph), each
    implementation is timed alone, so the failure lands on the row that caused it; those rows then
    have unpaired samples and their speedups fall back to a ratio of medians.
    """
    if not passed:
        return
    calls = {item.spec.name: item.step.run for item in passed}
    compile_times = {item.spec.name: item.compile_time_s for item in passed}
    with _failures_as_rows(device) as failed, torch.inference_mode():
        latencies = interleaved_latency(calls, device, timing, seed=case.seed, compile_time_s=compile_times)
    for item in passed:
        if failed:
            with _failures_as_rows(device) as alone_failed, torch.inference_mode():
                latency = dataclasses.replace(
                    measure_latency(item.step.run, device, timing, item.compile_time_s), rounds_id=None
                )
            if alone_failed:
                yield failure_row(item.identity, alone_failed[0])
                continue
        else:
            latency = latencies[item.spec.name]
        skips = case.causal and kernel_skips_masked_work(item.dispatch.sdpa_backend or "", item.spec.name)
        yield ResultRow(
            item.identity,
            Outcome("ok", ""),
            item.correctness,
            item.dispatch,
            latency=latency,
            memory=item.memory,
            cost=item.cost,
            counted=item.counts,
            roofline=roofline(case, item.cost, item.counts, latency, peaks, skips),
        )


class _failures_as_rows:
    """Collect an exception of the block instead of raising it; a sticky CUDA error is re-raised as lost.

    ``with _failures_as_rows(device) as failed:`` — afterwards ``failed`` holds the exception, if any.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.failed: list[BaseException] = []

    def __enter__(self) -> list[BaseException]:
        return self.failed

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        if isinstance(exc, Exception) and is_sticky_cuda_error(exc):  # before any other CUDA call: it would fail too
            raise CudaContextLostError(f"not run: an earlier CUDA error left the context unusable ({exc})") from None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if exc is None or not isinstance(exc, Exception):
            return False
        self.failed.append(exc)
        return True


def failure_row(case_identity: CaseIdentity, exc: BaseException) -> ResultRow:
    """Identity and outcome only: a failure has no measurements to report."""
    return ResultRow(case_identity, Outcome(*classify_failure(exc)))
