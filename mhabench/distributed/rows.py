"""The rows of one case in a tensor-parallel run: T = 1 on rank 0 alone, T > 1 in lockstep over T ranks.

Both go through the one case path (:func:`mhabench.run.case.run_case`). T = 1 cases are measured
exactly as a single-process run measures them, so the baseline is the ordinary one. For T > 1 the
ranks of the case's group are its :class:`Lockstep` peers: every rank builds its slice of the layer
and makes the checked call, rank 0 checks the all-reduced output against the float64 reference of
the whole layer, and whatever can go wrong on one rank alone (too little memory, a layer that cannot
be built, a mismatch) is agreed on before the next collective, since a rank that skipped a call
alone would leave the others waiting in its all-reduce. The timer is
:func:`~mhabench.measure.comm.lockstep_times_ms`, not the interleaved rounds, because an adaptive
timer would let each rank pick its own number of calls.

A failure on one rank *inside* a layer call cannot be agreed on (the other ranks are already in
the all-reduce): it ends the run on every rank.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

import torch
import torch.distributed as dist

from mhabench.impls.registry import ImplSpec
from mhabench.impls.tensor_parallel import TPGroup, using_group
from mhabench.measure.comm import CommStats, gather_peak_bytes, lockstep_times_ms, measure_comm
from mhabench.measure.peaks import DevicePeaks
from mhabench.measure.roofline import group_peaks
from mhabench.results.gpu_groups import Energy
from mhabench.results.schema import Distributed, LatencyStats, Outcome, ResultRow, RowStatus
from mhabench.run.case import Checked, Timed, run_case
from mhabench.scenario.cases import Case
from mhabench.scenario.config import TimingConfig

LOCKSTEP_ENERGY = "not read (lockstep timing across ranks)"
"""NVML is read around the interleaved rounds only; one GPU's energy would not be the group's anyway."""

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
        if row.status == RowStatus.OK and row.latency is not None:
            peak = row.memory.peak_memory_bytes if row.memory is not None else math.nan
            row = row.with_groups(communication(setup, row.latency, CommStats(0.0, 0, math.nan), [peak]))
        yield row.with_groups(launch(setup))


def launch(setup: RankSetup) -> Distributed:
    """The ``distributed`` columns every row of a torchrun launch has, whatever its outcome."""
    return Distributed(world_size=setup.world_size, backend=setup.backend)


def communication(setup: RankSetup, latency: LatencyStats, comm: CommStats, rank_peaks: list[float]) -> Distributed:
    """The ``distributed`` group of an ok row: the launch, its communication and every rank's peak memory."""
    return dataclasses.replace(
        launch(setup),
        comm_ms=comm.comm_ms,
        comm_share=comm.comm_ms / latency.latency_ms,
        allreduce_bytes=comm.allreduce_bytes,
        bus_bandwidth_gbps=comm.bus_bandwidth_gbps if math.isfinite(comm.bus_bandwidth_gbps) else None,
        rank_peak_memory_bytes=max(rank_peaks) if all(map(math.isfinite, rank_peaks)) else None,
    )


# --- T > 1 ---------------------------------------------------------------------------------------


def tensor_parallel_rows(
    case: Case, specs: list[ImplSpec], setup: RankSetup, tp: TPGroup, repeat: int
) -> Iterator[ResultRow]:
    """One row per implementation of a T > 1 case; every rank of ``tp`` makes the same calls in the same order.

    Placed against the roofs of the group's T devices (:func:`~mhabench.measure.roofline.group_peaks`).
    """
    rows = run_case(
        case,
        specs,
        setup.device,
        setup.run_id,
        group_peaks(setup.peaks[case.dtype], tp.size),
        setup.timing,
        repeat=repeat,
        guard=setup.memory_guard,
        timers=Lockstep(setup, tp),
    )
    for row in rows:
        yield row.with_groups(launch(setup))


class Lockstep:
    """The ranks of a tensor-parallel group as the timers of a case (:class:`mhabench.run.case.CaseTimers`).

    Rank 0 alone checks the output: after the all-reduce every rank holds the whole of it, and the
    verdict reaches the others through the agreement that follows the call. A rank runs a slice of
    the layer, so its counted ops are not the row's (the ``counted`` columns stay empty) and no
    profiler counts kernels around NCCL.
    """

    whole_layer = False

    def __init__(self, setup: RankSetup, tp: TPGroup) -> None:
        self.setup, self.tp = setup, tp

    @property
    def checks_output(self) -> bool:
        return self.tp.rank == 0

    def agree(self, outcome: Outcome | None) -> Outcome | None:
        return agreed_outcome(outcome, self.tp)

    def building(self) -> AbstractContextManager[object]:
        return using_group(self.tp)

    def time(self, passed: Sequence[Checked], timing: TimingConfig, seed: int) -> dict[str, Timed]:
        """Each implementation in turn: lockstep latency, then its communication and every rank's peak memory.

        ``seed`` orders interleaved rounds, which lockstep timing has none of.
        """
        return {item.spec.name: self._timed(item, timing) for item in passed}

    def _timed(self, item: Checked, timing: TimingConfig) -> Timed:
        call = item.step.run
        with torch.inference_mode():  # communication after the timing loop, which has warmed everything up
            samples_ms, calls_per_sample = lockstep_times_ms(
                call,
                self.setup.device,
                self.tp,
                warmup_runs=timing.warmup_runs,
                min_samples=timing.min_samples,
                min_run_time_s=timing.min_run_time_s,
            )
            comm = measure_comm(call, self.tp, calls=COMM_CALLS)
        latency = LatencyStats.from_samples(
            tuple(samples_ms), calls_per_sample, timing.noise_threshold, item.compile_time_s
        )
        peak = item.row.memory.peak_memory_bytes if item.row.memory is not None else math.nan
        rank_peaks = [float(b) if b >= 0 else math.nan for b in gather_peak_bytes(_bytes_or_minus_one(peak), self.tp)]
        return latency, communication(self.setup, latency, comm, rank_peaks), Energy(energy_source=LOCKSTEP_ENERGY)


def _bytes_or_minus_one(peak_bytes: float) -> int:
    """A peak as the integer :func:`gather_peak_bytes` carries; -1 when it was not measured (NaN)."""
    return int(peak_bytes) if math.isfinite(peak_bytes) else -1
