"""Interleaved, paired timing rounds: every implementation of a case is timed in the same rounds.

Timing each implementation in one contiguous stretch lets anything that changes over seconds (clock
and power state, another process, the allocator's history) land on one implementation and not the
others. Here:

1. **Warm-up by time.** Each implementation runs blocks of calls, growing to the size of one timed
   sample, until two successive full blocks agree within ``WARMUP_TOLERANCE`` (after at least
   ``warmup_runs`` calls), or until ``warmup_max_s`` is spent. Its block size (calls per sample) is
   then fixed from the settled per-call time, so one block lasts about
   ``min_run_time_s / min_samples``; it is never re-estimated.
2. **Rounds, with a budget per implementation.** Round *r* draws a fresh order of the implementations
   from ``numpy.random.default_rng(seed + r)`` and takes one block sample of each implementation still
   in the rounds, in that order. An implementation leaves the rounds, for good, once it has
   ``min_samples`` samples and ``min_run_time_s`` of timed time (enough), or once it has spent its own
   ``max_run_time_s`` (capped, perhaps with fewer samples); the rounds end when every one has left. So
   a slow implementation's cap never ends a fast one's timing, and every implementation's samples are
   the first rounds in a row: sample *i* of each comes from round *i*, and two implementations share
   exactly their first ``min(len(a), len(b))`` rounds, which is what paired statistics pair.

CPU: a sample is the mean per-call time of ``calls_per_sample`` back-to-back calls between two
``time.perf_counter`` readings, with Python's garbage collector paused as ``timeit`` does. CUDA: a
sample is the median of ``calls_per_sample`` per-call CUDA-event times, each call behind its own lead
(L2 flush or spin, :mod:`mhabench.measure.cuda_timing`), plus, in an implementation's first
``HOST_ROUNDS`` rounds, one host-timed synchronous call for ``host_latency_ms``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import numpy as np
import torch

from mhabench.measure.cuda_timing import MAX_CALLS, CudaCalls, Lead, make_lead, on_device
from mhabench.measure.nvml import RoundSampler
from mhabench.results.schema import LatencyStats
from mhabench.scenario.config import TimingConfig

WARMUP_TOLERANCE = 0.05  # successive full warm-up blocks within 5 %: settled, and above typical block noise
FULL_BLOCK_SHARE = 0.5  # a warm-up block at least half as long as a timed block is compared (not a ramp block)
CPU_MAX_BLOCK_CALLS = 1_000_000  # bounds a block when a call is too fast for the clock to see
HOST_ROUNDS = 5
"""Rounds whose sample adds a host-timed call (CUDA): a median of 5 ignores 2 outliers, and for a slow call,
whose block is that one call, a host call in every round would double its timing."""
Clock = Callable[[], float]


@dataclasses.dataclass(frozen=True)
class Block:
    """One timed block of calls."""

    per_call_ms: float
    """The sample: mean per-call time (CPU) or median of per-call event times (CUDA)."""
    timed_s: float
    """Time the block's calls took, summed: what ``min_run_time_s`` and ``max_run_time_s`` count."""
    host_ms: float = math.nan
    """CUDA rounds: wall time of one synchronous call taken right after the block."""


class BlockTimer(Protocol):
    """Times blocks of calls of one implementation; ``sample`` is what a round takes."""

    def block(self, calls: int) -> Block: ...

    def sample(self, calls: int) -> Block: ...


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """How one implementation's warm-up went."""

    calls: int
    seconds: float
    settled: bool
    """False when ``warmup_max_s`` ended it before two full blocks agreed."""
    per_call_ms: float
    """Per-call time of the last warm-up block: the block size is fixed from it."""
    block_calls: int


@dataclasses.dataclass(frozen=True)
class Timed:
    """One implementation's latency and its warm-up."""

    latency: LatencyStats
    warmup: WarmUp


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """A collection inside a block would be charged to the call, so none runs while timing (as in ``timeit``)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclasses.dataclass(frozen=True)
class CpuTimer:
    """Back-to-back calls between two clock readings."""

    fn: Callable[[], object]
    clock: Clock = time.perf_counter

    def block(self, calls: int) -> Block:
        with _gc_paused():
            start_s = self.clock()
            for _ in range(calls):
                self.fn()
            elapsed_s = self.clock() - start_s
        return Block(elapsed_s * 1e3 / calls, elapsed_s)

    def sample(self, calls: int) -> Block:
        return self.block(calls)


@dataclasses.dataclass(frozen=True)
class CudaTimer:
    """Event-timed calls behind leads; a round's sample adds one host-timed synchronous call."""

    calls: CudaCalls

    def block(self, calls: int) -> Block:
        times_ms = self.calls.device_ms(calls)
        return Block(statistics.median(times_ms), sum(times_ms) / 1e3)

    def sample(self, calls: int) -> Block:
        block = self.block(calls)
        return dataclasses.replace(block, host_ms=self.calls.host_ms(1)[0])


def block_calls_for(per_call_ms: float, target_block_s: float, max_calls: int) -> int:
    """Calls in one block so it lasts about ``target_block_s``: at least 1, at most ``max_calls``."""
    if per_call_ms <= 0:
        return max_calls
    return max(1, min(max_calls, round(target_block_s * 1e3 / per_call_ms)))


def warm_up(
    timer: BlockTimer, target_block_s: float, min_calls: int, max_s: float, max_calls: int, clock: Clock
) -> WarmUp:
    """Untimed blocks until two successive full blocks agree within ``WARMUP_TOLERANCE``, or ``max_s``.

    Blocks double from one call to the sample size, so a slow first call costs little and the blocks
    that are compared are as long as the samples will be. ``min_calls`` (``warmup_runs``) calls are
    made before warm-up may settle.
    """
    start_s, calls, size, previous_ms = clock(), 0, 1, math.nan
    while True:
        block = timer.block(size)
        calls += size
        wanted = block_calls_for(block.per_call_ms, target_block_s, max_calls)
        full = size * block.per_call_ms >= FULL_BLOCK_SHARE * target_block_s * 1e3 or size >= max_calls
        settled = full and calls >= min_calls and math.isclose(block.per_call_ms, previous_ms, rel_tol=WARMUP_TOLERANCE)
        spent_s = clock() - start_s
        if settled or spent_s >= max_s:
            return WarmUp(calls, spent_s, settled, block.per_call_ms, wanted)
        previous_ms = block.per_call_ms if full else math.nan
        size = wanted if full else min(2 * size, wanted)


def round_order(names: list[str], seed: int, round_index: int) -> list[str]:
    """The order of round ``round_index``: a permutation drawn from ``default_rng(seed + round_index)``.

    The seed is taken modulo 2⁶⁴ so a negative scenario seed works (numpy wants a non-negative one).
    """
    rng = np.random.default_rng((seed + round_index) % 2**64)
    return [names[i] for i in rng.permutation(len(names))]


def _timed_s(blocks: list[Block]) -> float:
    return sum(block.timed_s for block in blocks)


def _has_enough(blocks: list[Block], timing: TimingConfig) -> bool:
    """``min_samples`` samples and ``min_run_time_s`` of timed time: what an implementation's timing asks for."""
    return len(blocks) >= timing.min_samples and _timed_s(blocks) >= timing.min_run_time_s


def _in_rounds(blocks: list[Block], timing: TimingConfig) -> bool:
    """Neither enough nor capped: the implementation takes part in the next round."""
    return not _has_enough(blocks, timing) and _timed_s(blocks) < timing.max_run_time_s


def run_rounds(
    timers: Mapping[str, BlockTimer],
    block_calls: Mapping[str, int],
    timing: TimingConfig,
    seed: int,
    sampler: RoundSampler | None = None,
) -> dict[str, list[Block]]:
    """Rounds of one sample per implementation still in them, in a shuffled order, until each has left.

    Each implementation leaves once it has enough or has spent its own ``max_run_time_s``, and never
    comes back, so element *i* of every list comes from round *i*: a list is its rounds' prefix.
    Round *r* visits the implementations in :func:`round_order`'s order for all of them, less those
    that have left, so the order of the others does not depend on who has left. ``sampler`` (CUDA, NVML)
    reads the SM clock and clock-event reasons after each block, never inside one.
    """
    names = list(timers)
    blocks: dict[str, list[Block]] = {name: [] for name in names}
    round_index = 0
    while in_rounds := {name for name in names if _in_rounds(blocks[name], timing)}:
        for name in (name for name in round_order(names, seed, round_index) if name in in_rounds):
            blocks[name].append(_round_sample(timers[name], block_calls[name], round_index))
            if sampler is not None:
                sampler.after(name)
        round_index += 1
    return blocks


def _round_sample(timer: BlockTimer, calls: int, round_index: int) -> Block:
    """A round's block of calls, with its host-timed call in the first ``HOST_ROUNDS`` rounds only."""
    return timer.sample(calls) if round_index < HOST_ROUNDS else timer.block(calls)


def interleaved_medians_ms(samplers: Mapping[str, Callable[[], float]], rounds: int, seed: int = 0) -> dict[str, float]:
    """Median of each sampler's results over ``rounds`` shuffled rounds (one call of each per round).

    For comparing whole measurements (ours against ``triton.testing.do_bench``, say) so that drift
    in the device's clocks or temperature over the comparison lands on both arms alike.
    """
    results: dict[str, list[float]] = {name: [] for name in samplers}
    for round_index in range(rounds):
        for name in round_order(list(samplers), seed, round_index):
            results[name].append(samplers[name]())
    return {name: statistics.median(values) for name, values in results.items()}


def _timers(
    calls: Mapping[str, Callable[[], object]],
    device: torch.device,
    timing: TimingConfig,
    flush_l2: Mapping[str, bool] | None,
    clock: Clock,
) -> dict[str, BlockTimer]:
    """A CPU timer per call, or on CUDA a prepared :class:`CudaCalls` per call (leads shared by setting)."""
    if device.type != "cuda":
        return {name: CpuTimer(fn, clock) for name, fn in calls.items()}
    leads: dict[bool, Lead] = {}
    timers: dict[str, BlockTimer] = {}
    for name, fn in calls.items():
        flush = timing.flush_l2 if flush_l2 is None else flush_l2[name]
        if flush not in leads:
            leads[flush] = make_lead(device, flush)
        timers[name] = CudaTimer(CudaCalls.prepare(fn, device, leads[flush], timing.cuda_graphs))
    return timers


def _latency(
    blocks: list[Block], warmup: WarmUp, timing: TimingConfig, compile_time_s: float, rounds_id: str
) -> LatencyStats:
    stats = LatencyStats.from_samples(
        tuple(block.per_call_ms for block in blocks),
        warmup.block_calls,
        timing.noise_threshold,
        compile_time_s,
        capped=not _has_enough(blocks, timing),
    )
    stats = dataclasses.replace(stats, rounds_id=rounds_id)
    host_ms = [block.host_ms for block in blocks if not math.isnan(block.host_ms)]
    return dataclasses.replace(stats, host_latency_ms=statistics.median(host_ms)) if host_ms else stats


def time_in_rounds(
    calls: Mapping[str, Callable[[], object]],
    device: torch.device,
    timing: TimingConfig,
    seed: int,
    compile_time_s: Mapping[str, float] | None = None,
    *,
    flush_l2: Mapping[str, bool] | None = None,
    clock: Clock = time.perf_counter,
    sampler: RoundSampler | None = None,
) -> dict[str, Timed]:
    """Time every implementation of one case in the same shuffled rounds, after a warm-up by time: the one timer.

    ``calls`` maps an implementation's name to a zero-argument call of it on the case (run it under
    ``torch.inference_mode()`` as the runner does); one callable timed like a row is the one-entry case. The
    contract paired statistics rely on: ``times_ms[i]`` of every implementation was taken in round *i*, so for
    every *i* below both lengths ``a.times_ms[i] / b.times_ms[i]`` is a per-round ratio of two samples taken
    moments apart. The lengths differ when an implementation left the rounds early (``capped``: it spent
    ``max_run_time_s`` first). ``calls_per_sample`` is the block size fixed after warm-up. The same ``seed``
    gives the same orders. A call that raises ends the whole measurement. Each result holds the latency and
    the implementation's :class:`WarmUp`.

    CUDA: device time per call from CUDA events, each call behind its lead (the L2 flush unless
    ``timing.flush_l2`` is off), plus ``host_latency_ms``. CPU: ``time.perf_counter`` around blocks.
    ``flush_l2`` overrides ``timing.flush_l2`` per name on CUDA (the L2 check times one call warm and
    flushed in the same rounds); ``clock`` is injectable for tests; ``sampler`` reads NVML after each timed
    block (:mod:`mhabench.measure.nvml`; warm-up blocks are not read).
    """
    if not calls:
        return {}
    target_block_s = timing.min_run_time_s / timing.min_samples
    max_calls = MAX_CALLS if device.type == "cuda" else CPU_MAX_BLOCK_CALLS
    context = on_device(device) if device.type == "cuda" else contextlib.nullcontext()
    with context:
        timers = _timers(calls, device, timing, flush_l2, clock)
        warmups = {
            name: warm_up(timer, target_block_s, timing.warmup_runs, timing.warmup_max_s, max_calls, clock)
            for name, timer in timers.items()
        }
        block_calls = {name: warmup.block_calls for name, warmup in warmups.items()}
        blocks = run_rounds(timers, block_calls, timing, seed, sampler)
    compile_times = compile_time_s or {}
    rounds_id = uuid.uuid4().hex[:16]  # these rounds only: a resumed or sharded row never pairs with them
    return {
        name: Timed(
            _latency(blocks[name], warmups[name], timing, compile_times.get(name, math.nan), rounds_id), warmups[name]
        )
        for name in calls
    }
