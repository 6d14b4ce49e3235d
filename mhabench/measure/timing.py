"""Latency: medians over adaptive repetitions after warm-up, with the raw samples kept.

``torch.utils.benchmark.Timer.blocked_autorange`` picks a block size (calls per sample) so timer
overhead is negligible and synchronises CUDA; each sample is the mean per-call time of one block.
We add rounds until ``min_samples`` samples exist (capped at ``max_run_time_s``), which gives
``compare`` enough raw samples for its statistics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import torch
from torch.utils import benchmark

from mhabench.config import TimingConfig
from mhabench.measure.cuda_timing import cuda_latency
from mhabench.schema import LatencyStats


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def warm_up(fn: Callable[[], object], device: torch.device, runs: int) -> None:
    """Untimed calls so caches, allocator pools and lazy initialisation are settled."""
    for _ in range(runs):
        fn()
    synchronize(device)


def measure_latency(
    fn: Callable[[], object], device: torch.device, timing: TimingConfig, compile_time_s: float = math.nan
) -> LatencyStats:
    """CUDA: device time per call from CUDA events (L2 flushed before each call unless
    ``timing.flush_l2`` is off), plus the host-timed figure. CPU: :func:`cpu_latency`."""
    if device.type != "cuda":
        return cpu_latency(fn, device, timing, compile_time_s)
    times = cuda_latency(
        fn, device, warmup_runs=timing.warmup_runs, min_run_time_s=timing.min_run_time_s,
        max_run_time_s=timing.max_run_time_s, min_samples=timing.min_samples, flush_l2=timing.flush_l2,
        cuda_graphs=timing.cuda_graphs,
    )  # fmt: skip
    stats = LatencyStats.from_samples(times.device_ms, 1, timing.noise_threshold, compile_time_s)
    return dataclasses.replace(stats, host_latency_ms=times.median_host_ms)


def cpu_latency(
    fn: Callable[[], object], device: torch.device, timing: TimingConfig, compile_time_s: float = math.nan
) -> LatencyStats:
    """Warm ``fn`` up, then time it with ``blocked_autorange`` on all of torch's threads.

    If a round yields fewer than ``min_samples`` samples, further rounds sized for the missing
    samples follow, until ``max_run_time_s`` of timed runs is spent.
    """
    warm_up(fn, device, timing.warmup_runs)
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    times_s: list[float] = []
    round_s = timing.min_run_time_s
    spent_s = 0.0
    while True:
        measurement = timer.blocked_autorange(min_run_time=round_s)
        times_s.extend(measurement.times)
        block_s = measurement.number_per_run * float(np.mean(measurement.times))
        spent_s += block_s * len(measurement.times)
        missing = timing.min_samples - len(times_s)
        if missing <= 0 or spent_s >= timing.max_run_time_s:
            break
        round_s = min(missing * block_s * 1.1, timing.max_run_time_s - spent_s)
    return LatencyStats.from_samples(
        tuple(t * 1e3 for t in times_s), measurement.number_per_run, timing.noise_threshold, compile_time_s
    )
