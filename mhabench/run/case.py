"""One case, one path for every launch: screen, check, time, and assemble the rows.

Per case, in order:

1. :func:`screen` decides, before anything is built, which implementations get an ``unsupported`` or
   ``skipped`` row (a tensor-parallel case's layer, the capabilities, the memory guard);
2. each remaining implementation is built on the case's inputs (:mod:`mhabench.run.inputs`) and its
   first call is checked against the float64 reference under the dispatch tracker
   (:func:`checked_call`: SDPA backend, ops and allocations per call, counted FLOPs and bytes, the
   CPU peak); on CUDA one more call measures the peak memory and counts the kernels
   (:func:`device_call`); a failure or a mismatch is a row at once;
3. every implementation that passed is timed by the case's :class:`CaseTimers`: one process times them
   all in the same interleaved rounds (:class:`SingleProcess`, so sample *i* of each comes from round *i* and
   a speedup can be a median of per-round ratios); the ranks of a tensor-parallel group time them in
   lockstep (``mhabench.distributed.rows.Lockstep``);
4. with ``counters`` (the run's ``counters: hardware`` settings), the ok rows' hardware counters, read once
   the case's layers are freed (:mod:`mhabench.run.ncu_profile`, the last stage);
5. the ok rows follow, each placed on the roofline (:mod:`mhabench.measure.roofline`), by its hardware
   intensity where it has one.

A row is assembled from the value objects the trackers and the timer return
(:meth:`ResultRow.with_groups`), never field by field. The case's timers agree on every outcome that one of
them alone could reach (too little memory, a layer that cannot be built, a mismatch) before their
next collective call, so no rank is left waiting in an all-reduce the others skipped.

Failures become rows, never exceptions, except a sticky CUDA error, after which nothing in this
process can run (:class:`CudaContextLostError`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, TypeVar

import torch
from torch import nn

from mhabench.errors import MhabenchError, ReasonCode
from mhabench.impls.reference import check_output
from mhabench.impls.registry import ImplSpec
from mhabench.impls.tensor_parallel import is_tensor_parallel
from mhabench.measure.device_identity import device_id
from mhabench.measure.energy_window import window_energy
from mhabench.measure.nvml import RoundSampler, open_sampler, with_windows
from mhabench.measure.op_counts import count_cuda_kernels, counted
from mhabench.measure.peaks import DevicePeaks, device_name
from mhabench.measure.rounds import time_in_rounds
from mhabench.measure.torch_messages import as_note, caught_torch_messages
from mhabench.measure.trackers import CudaMemoryTracker, DispatchTracker, Stopwatch
from mhabench.results.gpu_groups import Energy
from mhabench.results.schema import (
    CaseIdentity,
    Correctness,
    Dispatch,
    Memory,
    ModelledCost,
    Outcome,
    ResultRow,
    RowStatus,
)
from mhabench.results.stages import StageBreakdown
from mhabench.run.breakdown import SLICE_ONLY, profiled_breakdowns
from mhabench.run.inputs import CaseInputs, make_inputs
from mhabench.run.memory_guard import available_now, case_too_big
from mhabench.run.ncu_profile import CounterSettings, case_counters
from mhabench.run.placement import finished
from mhabench.run.steps import Step, parameter_count, prepare
from mhabench.scenario.cases import Case
from mhabench.scenario.config import EnergyConfig, TimingConfig
from mhabench.scenario.device import canonical_device
from mhabench.torch_errors import classify_failure, failure_reason_code, is_sticky_cuda_error

Stage = TypeVar("Stage")
TIMED_ALONE = "not read (timed alone after the shared rounds failed)"
"""``energy_source`` of a row timed by itself: NVML is read around the shared rounds only."""


class CudaContextLostError(MhabenchError):
    """A sticky CUDA error: the process's CUDA context cannot run anything else.

    ``culprit`` is the failure row of the implementation whose call raised it, when that is known
    (its checked call); None when the error came out of the case's shared timing rounds.
    """

    def __init__(self, message: str, culprit: ResultRow | None = None) -> None:
        super().__init__(message)
        self.culprit = culprit


def identity(run_id: str, case: Case, impl: str, device: torch.device, repeat: int = 0) -> CaseIdentity:
    return CaseIdentity.of(
        case,
        impl=impl,
        run_id=run_id,
        device=canonical_device(device),
        device_name=device_name(device),
        device_id=device_id(canonical_device(device)),
        repeat=repeat,
    )


def modelled_cost(spec: ImplSpec, case: Case) -> ModelledCost | None:
    """The implementation's own cost model on this case; None when it declared none (a bare plugin)."""
    return ModelledCost.from_cost(spec.cost(case.workload())) if spec.cost else None


# --- screening: what is not even built --------------------------------------------------------


def screen(
    spec: ImplSpec,
    case: Case,
    device: torch.device,
    guard: bool = True,
    available: Callable[[torch.device], int] | None = None,
) -> Outcome | None:
    """Why ``spec`` is not run on ``case`` here, or None: what ``run``, torchrun and ``check-timing`` all ask.

    ``unsupported``: a ``tensor_parallel`` > 1 case needs a layer that splits its heads, and the
    implementation's declared capabilities. ``skipped``: with ``guard``, its predicted peak (or the
    float64 reference's) would not fit (``memory_guard``, reading the memory ``available`` there); without, such a
    case is tried and may be ``oom``.
    """
    if case.tensor_parallel > 1 and not is_tensor_parallel(spec):
        return Outcome(
            RowStatus.UNSUPPORTED,
            f"{spec.name} is not tensor-parallel (one device only); tp_fused and tp_naive split heads",
            reason_code=ReasonCode.NOT_TENSOR_PARALLEL.value,
        )
    reason = spec.capabilities.unsupported_reason(spec.name, case.workload(), dtype=case.dtype, device_type=device.type)
    if reason is not None:
        return Outcome(RowStatus.UNSUPPORTED, reason, reason_code=reason.code.value)
    too_big = case_too_big(spec, case, device, available) if guard else None
    return Outcome(RowStatus.SKIPPED, too_big) if too_big is not None else None


# --- who measures the case: one process, or the ranks of a group ------------------------------


@dataclasses.dataclass(frozen=True)
class Checked:
    """An implementation that passed its check: its row so far (every group but the timer's) and the call to time."""

    spec: ImplSpec
    step: Step
    row: ResultRow
    compile_time_s: float
    """First-call time of a compiling implementation (NaN: eager); the timer reports it with the latency."""


Timed = tuple[object, ...] | BaseException
"""What timing one implementation gave: the groups it measured (its ``LatencyStats`` among them), or the
exception that ended it (a failure row)."""


class CaseTimers(Protocol):
    """The processes that measure a case together: this one (:class:`SingleProcess`) or a tensor-parallel group's
    ranks."""

    @property
    def checks_output(self) -> bool:
        """This process compares the output with the float64 reference (one check is enough for a group)."""

    @property
    def whole_layer(self) -> bool:
        """This process runs the whole layer, so its counted ops and CUDA kernels describe the row's call."""

    def agree(self, outcome: Outcome | None) -> Outcome | None:
        """The outcome every peer acts on, given this one's (None: all went well here)."""

    def building(self) -> AbstractContextManager[object]:
        """Around building a layer (a tensor-parallel group: the ranks it splits over)."""

    def time(self, passed: Sequence[Checked], timing: TimingConfig, seed: int) -> dict[str, Timed]:
        """Time every checked implementation; per name, what :data:`Timed` says."""


class SingleProcess:
    """One process measures the case: nothing to agree on; every implementation timed in the same interleaved rounds."""

    checks_output = True
    whole_layer = True

    def __init__(self, device: torch.device, energy: EnergyConfig | None = None) -> None:
        self.device = device
        self.energy = energy or EnergyConfig()

    def agree(self, outcome: Outcome | None) -> Outcome | None:
        return outcome

    def building(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def time(self, passed: Sequence[Checked], timing: TimingConfig, seed: int) -> dict[str, Timed]:
        """The shared rounds of :func:`~mhabench.measure.rounds.time_in_rounds`.

        When they fail (one call raised, or could not be captured in a CUDA graph), each implementation
        is timed alone, so the failure lands on the row that caused it; those rows then have unpaired
        samples and their speedups fall back to a ratio of medians. On CUDA with NVML each timed block is
        followed by clock and clock-event reads (:mod:`mhabench.measure.nvml`) and, with ``energy.windows``, each
        implementation then runs its energy windows (:mod:`mhabench.measure.energy_window`); otherwise the
        energy group says why it is empty.
        """
        calls = {item.spec.name: item.step.run for item in passed}
        compile_times = {item.spec.name: item.compile_time_s for item in passed}
        with open_sampler(self.device) as sampler:
            with _failures_as_rows(self.device) as failed, torch.inference_mode():
                timed = time_in_rounds(
                    calls, self.device, timing, seed, compile_times, sampler=sampler if _sampling(sampler) else None
                )
            if not failed:
                return {
                    name: (result.latency, self._energy(sampler, name, calls[name], result.latency.latency_ms))
                    for name, result in timed.items()
                }
        unread = Energy(energy_source=sampler if isinstance(sampler, str) else TIMED_ALONE)
        return {name: self._timed_alone(call, timing, compile_times[name], unread) for name, call in calls.items()}

    def _energy(self, sampler: RoundSampler | str, name: str, call: Callable[[], object], latency_ms: float) -> Energy:
        """``name``'s clock columns from the rounds, and with ``energy.windows`` its energy windows' columns."""
        rounds = _energy(sampler, name)
        if not isinstance(sampler, RoundSampler) or not self.energy.windows:
            return rounds
        with torch.inference_mode():
            return with_windows(rounds, window_energy(sampler, call, latency_ms, self.energy, self.device))

    def _timed_alone(
        self, call: Callable[[], torch.Tensor], timing: TimingConfig, compile_time_s: float, unread: Energy
    ) -> Timed:
        """Timed by itself, without the rounds' NVML reads: its energy group (``unread``) only says why it is empty
        (the reason NVML could not be read at all, or that the row was timed alone)."""
        with _failures_as_rows(self.device) as failed, torch.inference_mode():
            latency = time_in_rounds({"call": call}, self.device, timing, 0, {"call": compile_time_s})["call"].latency
        if failed:
            return failed[0]
        return dataclasses.replace(latency, rounds_id=None), unread


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
    timers: CaseTimers | None = None,
    energy: EnergyConfig | None = None,
    counters: CounterSettings | None = None,
) -> Iterator[ResultRow]:
    """Yield one row per implementation: failures as they happen, then the ok rows after the timing.

    ``guard``: skip what would not fit (:func:`screen`). ``timers``: who measures the case with this
    process (:class:`SingleProcess` when None, measuring ``energy`` windows); ``peaks``: the roofs its ok rows are
    placed against; ``counters``: the hardware counters' settings (None: the rows get no hardware group).
    """
    timers = timers or SingleProcess(device, energy)
    available = available_now()  # read once for the case's screening
    refused = {spec.name: timers.agree(screen(spec, case, device, guard, available)) for spec in specs}
    inputs = _inputs_or_failure(case, device) if None in refused.values() else None
    passed: list[Checked] = []
    for spec in specs:
        ident = identity(run_id, case, spec.name, device, repeat)
        outcome = refused[spec.name]
        if outcome is not None:
            yield ResultRow(ident, outcome)
            continue
        assert inputs is not None
        try:
            with caught_torch_messages() as messages:
                result = check_impl(spec, case, inputs, device, ident, timers)
        except CudaContextLostError as lost:
            raise CudaContextLostError(str(lost), failure_row(ident, lost.__context__ or lost)) from None
        result = with_note(result, as_note(messages))
        if isinstance(result, ResultRow):
            yield result
        else:
            passed.append(result)
        del result  # ``passed`` alone holds the layers, so that emptying it frees them for the profiled child
    timed = timed_rows(passed, case, timing, timers)
    del inputs  # with the layers (``passed`` was emptied): the profiled child gets their memory
    yield from (row for row in timed if row.status != RowStatus.OK)
    ok = [row for row in timed if row.status == RowStatus.OK]
    hardware = case_counters(case, ok, device, counters) if counters is not None and ok else {}
    yield from (finished(row.with_groups(*hardware.get(row.case.impl, [])), case, peaks) for row in ok)


def with_note(result: Checked | ResultRow, note: str) -> Checked | ResultRow:
    """``result`` with the row's note: what torch said, as we expected, while it was built and checked."""
    if not note:
        return result
    row = result if isinstance(result, ResultRow) else result.row
    row = dataclasses.replace(row, outcome=dataclasses.replace(row.outcome, note=note))
    return row if isinstance(result, ResultRow) else dataclasses.replace(result, row=row)


def _inputs_or_failure(case: Case, device: torch.device) -> CaseInputs | Exception:
    """The case's inputs, or why they could not be drawn (e.g. the input itself does not fit): every
    runnable row then says so."""
    try:
        return make_inputs(case, device)
    except Exception as exc:
        return exc


def check_impl(
    spec: ImplSpec,
    case: Case,
    inputs: CaseInputs | Exception,
    device: torch.device,
    ident: CaseIdentity,
    timers: CaseTimers,
) -> Checked | ResultRow:
    """Build ``spec``, check its first call against the float64 reference, measure its memory.

    Returns what timing needs, or the row that ends the implementation here: a failure, or a
    ``mismatch`` when the output is off (NaN/Inf included). The timers agree after each stage (building
    comes before the first collective), so one that failed alone does not leave the others in the
    next all-reduce.
    """
    built = _attempt(device, ident, lambda: _build(spec, case, inputs, timers))
    stop = _agreed(timers, ident, built)
    if stop is not None:
        return stop
    module, step = built
    row = ResultRow(ident, Outcome(RowStatus.OK, ""), cost=modelled_cost(spec, case)).with_groups(
        Memory(params=parameter_count(module), kv_cache_bytes=step.kv_cache_bytes)
    )
    checked = _attempt(device, ident, lambda: _check(spec, case, inputs, step, device, row, timers))
    stop = _agreed(timers, ident, checked)
    if stop is not None:
        return stop
    row, compile_time_s = checked
    measured = _attempt(device, ident, lambda: device_call(spec, step.run, device, timers.whole_layer))
    stop = _agreed(timers, ident, measured)
    return stop if stop is not None else Checked(spec, step, row.with_groups(*measured), compile_time_s)


def _build(spec: ImplSpec, case: Case, inputs: CaseInputs | Exception, timers: CaseTimers) -> tuple[nn.Module, Step]:
    """The module and its step (forward, decode or train: :mod:`mhabench.run.steps`)."""
    if isinstance(inputs, Exception):
        raise inputs  # drawing the input failed: every runnable row says why
    with timers.building():
        return prepare(spec, case, inputs.weights, inputs.x)


def _check(
    spec: ImplSpec, case: Case, inputs: CaseInputs, step: Step, device: torch.device, row: ResultRow, timers: CaseTimers
) -> tuple[ResultRow, float] | ResultRow:
    """``row`` with what the checked call measured and its compile time; or its ``mismatch`` row."""
    output, measured, compile_time_s = checked_call(spec, step.run, device, row.cost, timers.whole_layer)
    row = row.with_groups(*measured)
    if timers.checks_output:
        check = check_output(output, inputs.reference_for(spec, case), spec.compute_dtype or case.dtype)
        row = row.with_groups(Correctness(check.max_abs_err, check.max_rel_err))
        if not check.ok:  # reported, never timed; no memory either: CUDA's needs the extra call a mismatch never gets
            return dataclasses.replace(row, outcome=Outcome(RowStatus.MISMATCH, check.reason), memory=None)
    return row, compile_time_s


def _attempt(device: torch.device, ident: CaseIdentity, stage: Callable[[], Stage]) -> Stage | ResultRow:
    """``stage()``, or the failure row of the exception it raised (a sticky CUDA error: lost context)."""
    with _failures_as_rows(device) as failed:
        return stage()
    return failure_row(ident, failed[0])


def _agreed(timers: CaseTimers, ident: CaseIdentity, result: object) -> ResultRow | None:
    """The row that ends the implementation on every peer, or None to go on.

    ``result`` is this peer's stage result: a :class:`ResultRow` when it ended here (a failure, a
    mismatch), which every peer then hears of; a peer that went on gets the outcome another reached.
    """
    own = result if isinstance(result, ResultRow) else None
    problem = timers.agree(own.outcome if own is not None else None)
    if problem is None:
        return None
    return own if own is not None else ResultRow(ident, problem)


# --- the measured calls ------------------------------------------------------------------------

# torch.compile runs a frame eagerly while any TorchDispatchMode is active, so on the CPU the storage
# tracker would measure the eager module instead of the compiled graph: no number rather than a wrong one.
COMPILED_CPU_MEMORY = "not measured (CPU: torch.compile runs eagerly under the dispatch-mode tracker)"


def checked_call(
    spec: ImplSpec, call: Callable[[], torch.Tensor], device: torch.device, cost: ModelledCost | None, whole_layer: bool
) -> tuple[torch.Tensor, list[object], float]:
    """The call whose output is checked, the row groups measured around it, and its compile time (NaN: eager).

    Eager: under the dispatch tracker, which gives what was dispatched, the counted FLOPs and bytes
    when ``whole_layer`` (a rank's are its slice's) and on the CPU the peak memory (``no_grad``, not
    ``inference_mode``, so composite ops decompose visibly). Compiling: this call compiles, so it is
    timed as ``compile_time_s`` (never part of the latency), under ``inference_mode`` like the timing
    loop (another grad mode would compile a second graph), and outside the dispatch tracker, under
    which torch.compile would not run the compiled graph.
    """
    if spec.compiles:
        with torch.inference_mode(), Stopwatch(device) as watch:
            output = call()
        unmeasured = [] if device.type == "cuda" else [Memory(math.nan, COMPILED_CPU_MEMORY)]
        return output, unmeasured, watch.seconds
    with torch.no_grad(), DispatchTracker() as tracker:
        output = call()
    groups: list[object] = [tracker.result()]
    if whole_layer:
        groups.append(counted(tracker.counts(), cost))
    if device.type != "cuda":
        groups.append(tracker.cpu_memory())
    return output, groups, math.nan


def device_call(
    spec: ImplSpec, call: Callable[[], torch.Tensor], device: torch.device, whole_layer: bool
) -> list[object]:
    """CUDA: the row groups of one more call: its peak memory and, for an eager implementation when
    ``whole_layer``, the kernels it launches (the profiler allocates nothing on the device, so one call
    serves both: at n = 16k some calls take a third of a second). CPU: none, the checked call measured it.

    A compiled graph is timed, not profiled; a rank's call is not profiled either (no profiler around NCCL).
    """
    if device.type != "cuda":
        return []
    profile = whole_layer and not spec.compiles
    kernels = None
    with torch.inference_mode() if spec.compiles else torch.no_grad(), CudaMemoryTracker(device) as memory:
        if profile:
            kernels = count_cuda_kernels(call, device)
        else:
            call()
    return [memory.result(), Dispatch(kernels_per_call=kernels)]


# --- the timed rows ----------------------------------------------------------------------------


def timed_rows(passed: list[Checked], case: Case, timing: TimingConfig, timers: CaseTimers) -> list[ResultRow]:
    """Time every checked implementation (``timers``' timer): one timed row each, not yet placed on the
    roofline, or the failure row of one whose timing failed. ``passed`` is emptied, so nothing here holds
    the layers once they are timed."""
    if not passed:
        return []
    with caught_torch_messages():  # the timed calls repeat the checked one: what torch says again is in its note
        timed = timers.time(passed, timing, case.seed)
    ok = [item for item in passed if not isinstance(timed[item.spec.name], BaseException)]
    breakdowns = dict(zip((item.spec.name for item in ok), _stages(ok, case, timers), strict=True))
    rows = []
    for item in passed:
        groups = timed[item.spec.name]
        rows.append(
            failure_row(item.row.case, groups)
            if isinstance(groups, BaseException)
            else item.row.with_groups(*groups, breakdowns[item.spec.name])
        )
    passed.clear()
    return rows


def _stages(timed: list[Checked], case: Case, timers: CaseTimers) -> list[StageBreakdown]:
    """The timed rows' breakdowns by stage from one more call each, after the case's timing (a rank's slice has
    none)."""
    if not timers.whole_layer:
        return [StageBreakdown(breakdown_source=SLICE_ONLY) for _ in timed]
    if not timed:
        return []
    calls = [(item.step.run, item.spec) for item in timed]
    return profiled_breakdowns(calls, case, torch.device(timed[0].row.case.device))


def _sampling(sampler: RoundSampler | str) -> bool:
    return isinstance(sampler, RoundSampler)


def _energy(sampler: RoundSampler | str, name: str) -> Energy:
    """``name``'s energy columns, or only the reason they are empty."""
    return sampler.energy(name) if isinstance(sampler, RoundSampler) else Energy(energy_source=sampler)


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
    return ResultRow(case_identity, Outcome(*classify_failure(exc), reason_code=failure_reason_code(exc)))
