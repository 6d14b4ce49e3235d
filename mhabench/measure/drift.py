"""Drift watch: a fixed reference workload timed at the start, between cases and at the end of a run.

Interleaved rounds protect the comparison *within* a case; nothing inside a case can tell whether the
machine itself changed over a long run (thermal throttling, a neighbour on a shared host, a power
cap). A reference that never changes, timed now and then, can: when its median moves by more than the
run's ``noise_threshold``, rows from the start and from the end of the run are not comparable, and
the user is told so in one line. The manifest keeps every reference timing.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import torch

from mhabench.measure.rounds import time_in_rounds
from mhabench.scenario.config import TimingConfig

CHECK_INTERVAL_S = 60.0  # between cases, the reference is timed again once this much time has passed
CPU_MATMUL_SIZE = 512  # float32: ~0.27 GFLOP, a few ms on a laptop core
CUDA_MATMUL_SIZE = 4096  # bfloat16: ~0.14 TFLOP, ~0.2 ms on an H100, long against launch overhead
REFERENCE_S = 0.2  # timed time per reference timing: ten samples of 20 ms, steady to a few per cent


def reference_workload(device: torch.device) -> tuple[Callable[[], object], str]:
    """``(call, description)``: a square matmul, float32 on the CPU and bfloat16 on CUDA, with fixed inputs."""
    size, dtype = (CUDA_MATMUL_SIZE, torch.bfloat16) if device.type == "cuda" else (CPU_MATMUL_SIZE, torch.float32)
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(size, size, generator=generator).to(device=device, dtype=dtype) for _ in range(2))
    return (lambda: torch.matmul(a, b)), f"{size}×{size} {str(dtype).removeprefix('torch.')} matmul on {device.type}"


def time_reference_ms(call: Callable[[], object], device: torch.device, seconds: float = REFERENCE_S) -> float:
    """Median ms of ``call`` over about ``seconds`` of timed calls, timed like a row (warm-up by time, then blocks)."""
    timing = TimingConfig(
        min_run_time_s=seconds, max_run_time_s=2 * seconds, min_samples=10, warmup_max_s=seconds, flush_l2=False
    )
    with torch.inference_mode():
        return time_in_rounds({"call": call}, device, timing, 0)["call"].latency.latency_ms


@dataclasses.dataclass(frozen=True)
class Drift:
    """The reference timings of a run and what they say."""

    reference_ms: tuple[float, ...]
    noise_threshold: float
    workload: str = ""

    @property
    def drift(self) -> float:
        """Relative change of the later timing farthest from the first (signed; 0.0 with one timing).

        The farthest, not the last, because a machine that slowed down mid-run and recovered still
        made the rows timed in between incomparable.
        """
        first = self.reference_ms[0]
        changes = [(later - first) / first for later in self.reference_ms[1:]]
        return max(changes, key=abs, default=0.0)

    @property
    def exceeded(self) -> bool:
        return abs(self.drift) > self.noise_threshold

    def manifest(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "reference_ms": list(self.reference_ms),
            "drift": self.drift,
            "exceeded": self.exceeded,
        }

    def warning(self) -> str | None:
        """One terminal line when the drift exceeds the noise threshold; ``None`` otherwise."""
        if not self.exceeded:
            return None
        farthest_ms = self.reference_ms[0] * (1 + self.drift)
        return (
            f"warning: the machine changed during the run: the reference {self.workload} took "
            f"{self.reference_ms[0]:.3g} ms at the start and {farthest_ms:.3g} ms later ({self.drift:+.0%}, "
            f"noise threshold {self.noise_threshold:.0%}); rows timed far apart may not be comparable"
        )


class DriftWatch:
    """Times the reference when created, between cases every ``interval_s``, and at :meth:`finish`.

    ``seconds`` is the timed time of each timing (a run with short rows can pass its own
    ``min_run_time_s`` so the watch costs no more than a row); ``measure`` (no arguments, returns ms)
    and ``clock`` are injectable, so tests need no real timing.
    """

    def __init__(
        self,
        device: torch.device,
        noise_threshold: float,
        *,
        seconds: float = REFERENCE_S,
        measure: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = CHECK_INTERVAL_S,
    ) -> None:
        if measure is None:
            call, self.workload = reference_workload(device)
            measure = functools.partial(time_reference_ms, call, device, seconds)
            measure()  # discarded: a process's first timing pays its start-up (thread pool, first page faults)
        else:
            self.workload = "workload"
        self._measure, self._clock, self._interval_s = measure, clock, interval_s
        self.noise_threshold = noise_threshold
        self.reference_ms: list[float] = []
        self.stopped = ""
        """Why the reference is no longer timed ("" while it is)."""
        self.check()

    def check(self) -> None:
        """Time the reference now."""
        self.reference_ms.append(self._measure())
        self._last_s = self._clock()

    def between_cases(self) -> None:
        """Time the reference again when ``interval_s`` has passed since the last timing (long runs only)."""
        if not self.stopped and self._clock() - self._last_s >= self._interval_s:
            self.check()

    def stop(self, reason: str) -> None:
        """Time the reference no more (this process lost its CUDA context); the manifest says why."""
        self.stopped = reason

    def result(self) -> Drift:
        return Drift(tuple(self.reference_ms), self.noise_threshold, self.workload)

    def finish(self) -> dict[str, Any]:
        """Time the reference a last time; the manifest's ``drift`` entry (``result().warning()`` is the line)."""
        if self.stopped:
            return {**self.result().manifest(), "stopped": self.stopped}
        self.check()
        return self.result().manifest()
