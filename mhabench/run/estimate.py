"""How long a run will take, before it runs (``run --dry-run``) and while it runs (time left).

A row's wall time follows from its per-call time and the config's timing rules (:mod:`mhabench.measure.rounds`):
warm-up blocks until two agree or ``warmup_max_s``, then rounds until ``min_samples`` samples and
``min_run_time_s`` of timed calls or the ``max_run_time_s`` cap, plus the calls outside the timing (the checked
call and the profiled ones of the stage breakdown). The per-call time is an earlier run's median latency of the
same (case, implementation) where one is known (``run --history DIR``), else the cost model's FLOPs and bytes on
this machine's roofs at :data:`MODELLED_EFFICIENCY`. Each process adds its start-up, and the command its answer.
The figures of the fixed costs were measured on a 2-vCPU VM, torch 2.13.0+cpu (docs/findings/fast-default.md);
an estimate is a hint, never a measurement, and is labelled as one.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from mhabench.measure.peaks import DevicePeaks
from mhabench.results.schema import ModelledCost
from mhabench.scenario.config import TimingConfig

MODELLED_EFFICIENCY = 0.3
"""Share of the roofline bound a CPU attention call reaches: the default's rows ran at 10–70 % of their roof."""
CALL_OVERHEAD_S = 1e-4
"""Per-call dispatch time the roofline bound leaves out (tens of aten ops at a few microseconds each)."""
ROW_OVERHEAD_S = 0.15
"""A row's work outside its timed calls: building the layer, the dispatch tracker's slower check, its share of the
case's float64 reference, profiling, writing the row."""
PROCESS_START_S = 3.0
"""One process's start-up: the interpreter and torch, the drift watch's reference timings. A replicated run has
one more, the parent that starts the replicates."""
FORKED_START_S = 0.7
"""A replicate forked from the command's process (the CPU, :func:`mhabench.run.replicates.can_fork`): no imports,
the drift watch's reference timings and the merge's share (docs/findings/fast-default.md)."""
ROOFLINE_PROBE_S = 2.0
"""Probing the CPU's roofs (a datasheet GPU has none); once per run, replicates share it."""
ANSWER_S = 2.0
"""After the run: merging replicates, the summary table and the short answer."""
CHECKED_CALLS = 1
PROFILED_CALLS = 1
"""The stage breakdown's call: one on CUDA, and on the CPU one that nothing preempted
(:func:`mhabench.measure.stages.profile_cpu`; a preempted one adds one or two)."""


@dataclasses.dataclass(frozen=True)
class RowEstimate:
    """One (case, implementation): its per-call time, where that came from, and the row's wall seconds."""

    case_id: str
    impl: str
    per_call_s: float
    source: str
    """``history`` (an earlier run's median) or ``modelled`` (the cost model on this machine's roofs)."""
    seconds: float


@dataclasses.dataclass(frozen=True)
class RunEstimate:
    """A whole run: its rows (one process's), the processes that each measure them all, the fixed costs."""

    rows: tuple[RowEstimate, ...]
    processes: int
    process_start_s: float
    """Each measuring process's start-up."""
    probe_s: float
    answer_s: float
    parent_start_s: float = PROCESS_START_S
    """The command's own start-up where it starts replicates (one process measures in the command's own)."""

    @property
    def process_s(self) -> float:
        """One measuring process: its start-up and its rows."""
        return self.process_start_s + sum(row.seconds for row in self.rows)

    @property
    def total_s(self) -> float:
        parent_s = self.parent_start_s if self.processes > 1 else 0.0
        return parent_s + self.processes * self.process_s + self.probe_s + self.answer_s

    def sources(self) -> dict[str, int]:
        """How many rows took their per-call time from each source."""
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row.source] = counts.get(row.source, 0) + 1
        return counts


def modelled_call_s(cost: ModelledCost | None, peaks: DevicePeaks) -> float:
    """The roofline bound of one call (compute or traffic, whichever is slower) at :data:`MODELLED_EFFICIENCY`,
    plus the dispatch overhead; only the overhead for a call with no cost model (a bare plugin)."""
    if cost is None or peaks.peak_tflops <= 0 or peaks.peak_gbps <= 0:
        return CALL_OVERHEAD_S
    bound_s = max(cost.flops / (peaks.peak_tflops * 1e12), cost.bytes_moved / (peaks.peak_gbps * 1e9))
    return bound_s / MODELLED_EFFICIENCY + CALL_OVERHEAD_S


def warmup_s(per_call_s: float, timing: TimingConfig) -> float:
    """Warm-up: blocks growing to one sample's size until two full blocks agree (about three blocks, at least
    ``warmup_runs`` calls and two more), never longer than ``warmup_max_s``."""
    block_s = max(per_call_s, timing.min_run_time_s / timing.min_samples)
    settled_s = max(3 * block_s, (max(timing.warmup_runs, 1) + 2) * per_call_s)
    return min(timing.warmup_max_s, settled_s)


def timed_s(per_call_s: float, timing: TimingConfig) -> float:
    """The timed rounds: samples of whole blocks until ``min_samples`` and ``min_run_time_s``, capped."""
    target_block_s = timing.min_run_time_s / timing.min_samples
    block_s = max(1, round(target_block_s / per_call_s)) * per_call_s if per_call_s > 0 else target_block_s
    samples = max(timing.min_samples, math.ceil(timing.min_run_time_s / block_s))
    return min(samples * block_s, timing.max_run_time_s + block_s)  # the cap is checked after a sample


def row_seconds(per_call_s: float, timing: TimingConfig) -> float:
    """One row's wall time: warm-up, timed rounds, the calls outside them and its fixed overhead."""
    untimed_calls = CHECKED_CALLS + PROFILED_CALLS
    return warmup_s(per_call_s, timing) + timed_s(per_call_s, timing) + untimed_calls * per_call_s + ROW_OVERHEAD_S


RowKey = tuple[str, str]
"""(case_id, implementation)."""


@dataclasses.dataclass(frozen=True)
class PlannedRow:
    """What the estimate needs of a planned row: its identity, its modelled cost and its dtype's roofs."""

    case_id: str
    impl: str
    cost: ModelledCost | None
    peaks: DevicePeaks


def estimate_run(
    rows: Sequence[PlannedRow],
    timing: TimingConfig,
    *,
    processes: int = 1,
    repeats: int = 1,
    known_ms: Mapping[RowKey, float] | None = None,
    probed: bool = True,
    forked: bool = False,
) -> RunEstimate:
    """The estimate of a run of ``rows`` ``repeats`` times in each of ``processes`` processes. ``known_ms``: median
    latencies of earlier runs per (case id, implementation), used before the model; ``probed``: the run probes
    its roofs (a CPU; a GPU with a datasheet does not); ``forked``: replicates are forks of the command's process."""
    known = known_ms or {}
    estimates = []
    for row in rows:
        latency_ms = known.get((row.case_id, row.impl))
        if latency_ms is not None and math.isfinite(latency_ms) and latency_ms > 0:
            per_call_s, source = latency_ms / 1e3, "history"
        else:
            per_call_s, source = modelled_call_s(row.cost, row.peaks), "modelled"
        seconds = repeats * row_seconds(per_call_s, timing)
        estimates.append(RowEstimate(row.case_id, row.impl, per_call_s, source, seconds))
    start_s = FORKED_START_S if forked and processes > 1 else PROCESS_START_S
    return RunEstimate(tuple(estimates), processes, start_s, ROOFLINE_PROBE_S if probed else 0.0, ANSWER_S)


def processes_left_s(processes: int, finished_s: Sequence[float]) -> float:
    """Time left of a run of ``processes`` one after another, once ``finished_s`` (the wall seconds of those that
    ended) are known: the next ones should take what these did on average."""
    left = processes - len(finished_s)
    return left * sum(finished_s) / len(finished_s) if finished_s and left > 0 else 0.0
