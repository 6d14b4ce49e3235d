"""Latency of one callable: the one-implementation case of :func:`mhabench.measure.rounds.interleaved_latency`.

Callers that time a single thing (the probe, the GPU check, the drift reference, the distributed
path) get the same warm-up by time, block sizing and CUDA-event timing as a case's implementations.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from mhabench.measure.rounds import interleaved_latency
from mhabench.results.schema import LatencyStats
from mhabench.scenario.config import TimingConfig


def measure_latency(
    fn: Callable[[], object], device: torch.device, timing: TimingConfig, compile_time_s: float = math.nan
) -> LatencyStats:
    """Warm ``fn`` up by time, then time it in rounds until ``min_samples`` and ``min_run_time_s`` (or the cap).

    CUDA: device time per call from CUDA events, each call behind its lead (the L2 flush unless
    ``timing.flush_l2`` is off), plus ``host_latency_ms``. CPU: ``time.perf_counter`` around blocks.
    """
    return interleaved_latency({"call": fn}, device, timing, seed=0, compile_time_s={"call": compile_time_s})["call"]
