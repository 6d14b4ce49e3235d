"""The rows of one case in a tensor-parallel run: T = 1 on rank 0 alone, T > 1 in lockstep over T ranks.

T = 1 cases are measured exactly as a single-process run measures them (``case_runner.run_case``),
so the baseline is the ordinary one. For T > 1 every rank of the case's group builds its slice of
the layer and makes the checked call, and rank 0 checks the all-reduced output against the float64
reference of the whole layer. Whatever can go wrong on one rank alone (too little memory, a layer
that cannot be built, a mismatch) is agreed on before the next collective, since a rank that
skipped a call alone would leave the others waiting in its all-reduce. The timing is
:func:`~mhabench.impls.tensor_parallel.lockstep_times_ms`, not the single-process timer, because an
adaptive timer would let each rank pick its own number of calls.

A failure on one rank *inside* a layer call cannot be agreed on (the other ranks are already in
the all-reduce): it ends the run on every rank.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import nn

from mhabench.impls.reference import check_output
from mhabench.impls.registry import ImplSpec
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.impls.tensor_parallel import TPGroup, is_tensor_parallel, using_group
from mhabench.measure.comm import CommStats, gather_peak_bytes, lockstep_times_ms, measure_comm
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.schema import CaseIdentity, Correctness, Distributed, LatencyStats, Memory, Outcome, ResultRow
from mhabench.run.case import (
    CaseInputs,
    Checked,
    CudaContextLostError,
    checked_call,
    device_call,
    identity,
    make_inputs,
    memory_guard,
    modelled_cost,
    roofline,
    run_case,
    unsupported_reason,
)
from mhabench.run.steps import Step, parameter_count, prepare
from mhabench.scenario.config import Case, TimingConfig
from mhabench.torch_errors import classify_failure, is_sticky_cuda_error

COMM_CALLS = 10
"""Tracked calls whose median all-reduce time is ``comm_ms``."""

Problem = TypeVar("Problem")


@dataclasses.dataclass(frozen=True)
class RankSetup:
    """What every case of one rank's run shares."""

    device: torch.device
    world_size: int
    backend: str
    run_id: str
    peaks: Mapping[str, DevicePeaks]
    """One device's roofs per dtype (rank 0 measured them; every rank holds the same)."""
    timing: TimingConfig
    memory_guard: bool = True
    """``memory_guard`` of the config (``--no-memory-guard``): skip what is predicted not to fit."""


def first_failure(problem: Problem | None, tp: TPGroup) -> tuple[int, Problem] | None:
    """The lowest rank of ``tp`` that has a ``problem``, and the problem, on every rank; None when none has.

    One small all-reduce when every rank is fine; a broadcast of the problem (any picklable value)
    otherwise.
    """
    if tp.group is None:
        return None if problem is None else (0, problem)
    first = torch.tensor([tp.rank if problem is not None else tp.size], dtype=torch.int64)
    dist.all_reduce(first, op=dist.ReduceOp.MIN, group=tp.group)
    source = int(first.item())
    if source == tp.size:
        return None
    shared = [problem]
    # a group is the first tp.size ranks, so a rank in it is also the global rank that src names
    dist.broadcast_object_list(shared, src=source, group=tp.group, device=torch.device("cpu"))
    return source, shared[0]


def agreed_outcome(outcome: Outcome | None, tp: TPGroup) -> Outcome | None:
    """:func:`first_failure` of an outcome; a problem found on another rank than 0 says which."""
    found = first_failure(outcome, tp)
    if found is None:
        return None
    rank, problem = found
    return problem if rank == 0 else Outcome(problem.status, f"rank {rank}: {problem.error}")


# --- T = 1 ---------------------------------------------------------------------------------------


def single_rank_rows(case: Case, specs: list[ImplSpec], setup: RankSetup, repeat: int) -> Iterator[ResultRow]:
    """The single-process rows of a T = 1 case (rank 0 alone), with the distributed columns filled."""
    rows = run_case(
        case,
        specs,
        setup.device,
        setup.run_id,
        setup.peaks[case.dtype],
        setup.timing,
        repeat=repeat,
        guard=setup.memory_guard,
    )
    for row in rows:
        peak = row.memory.peak_memory_bytes if row.memory is not None else math.nan
        yield with_distributed(row, setup, CommStats(0.0, 0, math.nan), [peak])


def with_distributed(row: ResultRow, setup: RankSetup, comm: CommStats | None, rank_peaks: list[float]) -> ResultRow:
    """``row`` with its ``Distributed`` group: the launch always, the communication for an ok row."""
    group = Distributed(world_size=setup.world_size, backend=setup.backend)
    if row.status == "ok" and row.latency is not None and comm is not None:
        group = dataclasses.replace(
            group,
            comm_ms=comm.comm_ms,
            comm_share=comm.comm_ms / row.latency.latency_ms,
            allreduce_bytes=comm.allreduce_bytes,
            bus_bandwidth_gbps=comm.bus_bandwidth_gbps if math.isfinite(comm.bus_bandwidth_gbps) else None,
            rank_peak_memory_bytes=max(rank_peaks) if all(map(math.isfinite, rank_peaks)) else None,
        )
    return dataclasses.replace(row, distributed=group)


# --- T > 1 ---------------------------------------------------------------------------------------


def refusal(spec: ImplSpec, case: Case, device: torch.device, guard: bool = True) -> Outcome | None:
    """Why ``spec`` is not run on this T > 1 case: not tensor-parallel, its capabilities, or too big."""
    if not is_tensor_parallel(spec):
        return Outcome(
            "unsupported", f"{spec.name} is not tensor-parallel (one device only); tp_fused and tp_naive split heads"
        )
    reason = unsupported_reason(spec, case, device)
    if reason is not None:
        return Outcome("unsupported", reason)
    too_big = memory_guard(spec, case, device) if guard else None
    return Outcome("skipped", too_big) if too_big is not None else None


def tensor_parallel_rows(
    case: Case, specs: list[ImplSpec], setup: RankSetup, tp: TPGroup, repeat: int
) -> Iterator[ResultRow]:
    """One row per implementation of a T > 1 case; every rank of ``tp`` makes the same calls in the same order.

    The ranks agree three times before timing: on what to run, after building (before the first
    all-reduce) and after the checked call. A rank that could not build its slice says so in the
    second agreement instead of leaving the others in the checked call's all-reduce.
    """
    inputs: CaseInputs | None = None
    for spec in specs:
        ident = identity(setup.run_id, case, spec.name, setup.device, repeat)
        problem = agreed_outcome(refusal(spec, case, setup.device, setup.memory_guard), tp)
        if problem is None:
            failed = None
            try:
                inputs = inputs or make_inputs(case, setup.device)  # every rank: the same seed, the same weights
                with using_group(tp):
                    module, step = prepare(spec, case, inputs.weights, inputs.x)
            except Exception as exc:
                failed = failure_outcome(exc, tp)
            problem = agreed_outcome(failed, tp)
        if problem is not None:
            yield with_distributed(ResultRow(ident, problem), setup, None, [])
            continue
        checked = checked_layer(spec, case, inputs, module, step, setup, tp, ident)
        if isinstance(checked, ResultRow):
            yield with_distributed(checked, setup, None, [])
            continue
        yield timed_row(checked, case, setup, tp)


def failure_outcome(exc: Exception, tp: TPGroup) -> Outcome:
    """An exception as a row's outcome; a sticky CUDA error ends the run instead (the context is lost)."""
    if is_sticky_cuda_error(exc):
        raise CudaContextLostError(f"rank {tp.rank}: a CUDA error left the context unusable ({exc})") from None
    return Outcome(*classify_failure(exc))


def checked_layer(
    spec: ImplSpec,
    case: Case,
    inputs: CaseInputs,
    module: nn.Module,
    step: Step,
    setup: RankSetup,
    tp: TPGroup,
    ident: CaseIdentity,
) -> Checked | ResultRow:
    """The checked call on every rank; rank 0 checks its output against the float64 reference of the whole layer.

    After the all-reduce every rank holds the whole output, so one check is enough; its verdict
    reaches the other ranks through the agreement that follows the call.
    """
    own: ResultRow | None = None
    correctness = Correctness()
    try:
        output, checked = checked_call(spec, step.run, setup.device)
        if tp.rank == 0:
            check = check_output(output, inputs.reference_for(spec, case), case.dtype)
            correctness = Correctness(check.max_abs_err, check.max_rel_err)
            if not check.ok:
                mismatch = Outcome("mismatch", check.reason)
                own = ResultRow(ident, mismatch, correctness, checked.dispatch, cost=modelled_cost(spec, case))
        del output
    except Exception as exc:
        own = ResultRow(ident, failure_outcome(exc, tp))
    problem = agreed_outcome(own.outcome if own is not None else None, tp)
    if problem is not None:
        return own if own is not None else ResultRow(ident, problem)
    memory, _ = device_call(spec, step.run, setup.device, checked, count_kernels=False)  # no profiler around NCCL
    return Checked(
        spec,
        step,
        ident,
        correctness,
        checked.dispatch,
        None,
        Memory(memory.peak_bytes, memory.method, parameter_count(module), step.kv_cache_bytes),
        modelled_cost(spec, case),
        checked.compile_time_s,
    )


def timed_row(checked: Checked, case: Case, setup: RankSetup, tp: TPGroup) -> ResultRow:
    """Communication, lockstep latency and every rank's peak memory of a checked layer: its ok row."""
    call, timing = checked.step.run, setup.timing
    with torch.inference_mode():  # communication after the timing loop, which has warmed everything up
        samples_ms, calls_per_sample = lockstep_times_ms(
            call,
            setup.device,
            tp,
            warmup_runs=timing.warmup_runs,
            min_samples=timing.min_samples,
            min_run_time_s=timing.min_run_time_s,
        )
        comm = measure_comm(call, tp, calls=COMM_CALLS)
    latency = LatencyStats.from_samples(
        tuple(samples_ms), calls_per_sample, timing.noise_threshold, checked.compile_time_s
    )
    peak = checked.memory.peak_memory_bytes
    rank_peaks = [float(b) if b >= 0 else math.nan for b in gather_peak_bytes(_bytes_or_minus_one(peak), tp)]
    skips = case.causal and kernel_skips_masked_work(checked.dispatch.sdpa_backend or "", checked.spec.name)
    row = ResultRow(
        checked.identity,
        Outcome("ok", ""),
        checked.correctness,
        checked.dispatch,
        latency=latency,
        memory=checked.memory,
        cost=checked.cost,
        roofline=roofline(case, checked.cost, None, latency, group_peaks(setup.peaks[case.dtype], tp.size), skips),
    )
    return with_distributed(row, setup, comm, rank_peaks)


def _bytes_or_minus_one(peak_bytes: float) -> int:
    """A peak as the integer :func:`gather_peak_bytes` carries; -1 when it was not measured (NaN)."""
    return int(peak_bytes) if math.isfinite(peak_bytes) else -1


def group_peaks(one_device: DevicePeaks, ranks: int) -> DevicePeaks:
    """The roofs of the ``ranks`` devices one layer runs on: ``ranks`` times one device's.

    The counted FLOPs and bytes of a rank describe its slice only, so a T > 1 row is placed by the
    cost model of the whole layer (its ``counted`` columns stay empty) against the group's roofs.
    """
    if ranks == 1:
        return one_device
    return DevicePeaks(
        one_device.peak_tflops * ranks, one_device.peak_gbps * ranks, f"{one_device.source}; × {ranks} ranks"
    )
