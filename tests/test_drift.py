"""Drift watch: when the reference is timed, how drift is computed, the manifest entry and the warning line."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch

from mhabench.measure import drift as drift_module
from mhabench.measure.drift import Drift, DriftWatch, reference_workload
from mhabench.scenario.config import TimingConfig

CPU = torch.device("cpu")


def fake(values_ms: list[float]) -> tuple[Callable[[], float], Callable[[], float], list[float]]:
    """A measure that returns ``values_ms`` in turn, and a clock the test sets through the returned list."""
    timings: Iterator[float] = iter(values_ms)
    now = [0.0]
    return (lambda: next(timings)), (lambda: now[0]), now


def test_the_reference_is_timed_at_start_when_due_and_at_the_end() -> None:
    measure, clock, now = fake([2.0, 2.1, 2.15])
    watch = DriftWatch(CPU, 0.1, measure=measure, clock=clock, interval_s=60.0)
    assert watch.reference_ms == [2.0]  # at start
    now[0] = 59.0
    watch.between_cases()
    assert watch.reference_ms == [2.0]  # not due yet
    now[0] = 61.0
    watch.between_cases()
    now[0] = 100.0
    watch.between_cases()  # 39 s after the last timing: not due
    assert watch.reference_ms == [2.0, 2.1]
    entry = watch.finish()
    assert entry == {
        "workload": "workload",
        "reference_ms": [2.0, 2.1, 2.15],
        "drift": pytest.approx(0.075),
        "exceeded": False,
    }


@pytest.mark.parametrize(
    ("reference_ms", "drift", "exceeded"),
    [
        ((2.0,), 0.0, False),  # one timing: nothing to compare
        ((2.0, 2.1), 0.05, False),
        ((2.0, 2.5), 0.25, True),
        ((2.0, 1.5), -0.25, True),  # faster counts too: the rows before were timed on a slower machine
        ((2.0, 3.0, 2.0), 0.5, True),  # slowed mid-run and recovered: the farthest timing decides
        ((2.0, 2.19, 2.0), 0.095, False),  # within the threshold
    ],
)
def test_drift_is_the_farthest_relative_change(reference_ms: tuple[float, ...], drift: float, exceeded: bool) -> None:
    result = Drift(reference_ms, noise_threshold=0.1)
    assert result.drift == pytest.approx(drift) and result.exceeded == exceeded


def test_the_warning_is_one_line_with_the_figures() -> None:
    assert Drift((2.0, 2.1), 0.1, "512×512 float32 matmul on cpu").warning() is None
    line = Drift((2.0, 2.6, 2.1), 0.1, "512×512 float32 matmul on cpu").warning()
    assert line is not None and "\n" not in line
    for figure in ("512×512 float32 matmul on cpu", "2 ms", "2.6 ms", "+30%", "10%"):
        assert figure in line


def test_the_default_reference_is_a_fixed_matmul_timed_like_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """No injected measure: the CPU reference is the 512² float32 matmul, and the same inputs every time."""
    calls: list[torch.Tensor] = []

    def fake_rounds(
        named: dict[str, Callable[[], torch.Tensor]], device: torch.device, timing: TimingConfig, seed: int
    ) -> dict[str, object]:
        assert timing.min_run_time_s == 0.05 and not timing.flush_l2  # as long as asked, L2 left alone
        ((name, call),) = named.items()
        calls.append(call())
        return {name: type("Timed", (), {"latency": type("Stats", (), {"latency_ms": 3.0})()})()}

    monkeypatch.setattr(drift_module, "time_in_rounds", fake_rounds)
    watch = DriftWatch(CPU, 0.1, seconds=0.05)
    watch.finish()
    assert watch.reference_ms == [3.0, 3.0] and watch.workload == "512×512 float32 matmul on cpu"
    assert calls[0].shape == (512, 512) and calls[0].dtype == torch.float32 and torch.equal(calls[0], calls[1])
    first, _ = reference_workload(CPU)
    assert torch.equal(first(), calls[0])  # seeded inputs: every run times the same matmul


def test_a_stopped_watch_times_nothing_more_and_says_why() -> None:
    """After a sticky CUDA error the parent's context is gone: no more reference timings, and the manifest says so."""
    measure, clock, now = fake([2.0])
    watch = DriftWatch(CPU, 0.1, measure=measure, clock=clock, interval_s=60.0)
    watch.stop("context lost")
    now[0] = 120.0
    watch.between_cases()
    entry = watch.finish()  # a further timing would exhaust the fake and raise
    assert entry["reference_ms"] == [2.0] and entry["stopped"] == "context lost" and not entry["exceeded"]
