"""CUDA-event timing logic with a fake CUDA (a fake clock, events, streams and graphs), and on a real GPU.

The fake makes the order of operations checkable: each timed call is flushed first, bracketed by its
own events, the flush is outside them, everything runs under the requested device, and the host-timed
figure is device time plus what synchronizing adds.
"""

from __future__ import annotations

import contextlib
import statistics
import types
from collections.abc import Iterator

import pytest
import torch

from mhabench.errors import UnsupportedError
from mhabench.measure import cuda_timing
from mhabench.measure.cuda_timing import MAX_CALLS, calls_for, cuda_event_times_ms, cuda_latency, flush_bytes_for

CALL_MS, FLUSH_MS, SYNC_MS = 2.0, 0.5, 0.01


class FakeCuda:
    """Just enough of torch.cuda: one clock that calls, flushes and synchronizations advance."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.log: list[str] = []
        self.devices: list[str] = []

    def call(self) -> None:
        self.log.append("call")
        self.now_ms += CALL_MS

    def flush(self) -> None:
        self.log.append("flush")
        self.now_ms += FLUSH_MS

    def synchronize(self, device: torch.device | None = None) -> None:
        self.devices.append(str(device))
        self.now_ms += SYNC_MS

    @contextlib.contextmanager
    def device(self, device: torch.device) -> Iterator[None]:
        self.log.append(f"enter {device}")
        yield
        self.log.append(f"exit {device}")

    def event_class(self) -> type:
        fake = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                assert enable_timing
                self.at_ms = -1.0

            def record(self) -> None:
                fake.log.append("event")
                self.at_ms = fake.now_ms

            def elapsed_time(self, end: Event) -> float:
                return end.at_ms - self.at_ms

        return Event


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    cuda = FakeCuda()
    monkeypatch.setattr(torch.cuda, "Event", cuda.event_class())
    monkeypatch.setattr(torch.cuda, "synchronize", cuda.synchronize)
    monkeypatch.setattr(torch.cuda, "device", cuda.device)
    monkeypatch.setattr(cuda_timing.time, "perf_counter", lambda: cuda.now_ms / 1e3)
    monkeypatch.setattr(cuda_timing, "make_flush", lambda device, on: (cuda.flush, 123) if on else (lambda: None, 0))
    return cuda


def test_each_call_is_flushed_then_bracketed_by_its_events(fake: FakeCuda) -> None:
    times = cuda_event_times_ms(fake.call, torch.device("cuda:1"), n_calls=3, flush_l2=True)
    assert times.device_ms == (CALL_MS,) * 3  # the flush is outside the events
    assert fake.log[:7] == ["enter cuda:1", "flush", "event", "call", "event", "flush", "event"]
    assert fake.log[-1] == "exit cuda:1" and set(fake.devices) == {"cuda:1"}
    assert times.flush_bytes == 123 and times.flush_l2 and not times.cuda_graphs


def test_host_time_is_device_time_plus_synchronization(fake: FakeCuda) -> None:
    times = cuda_event_times_ms(fake.call, torch.device("cuda"), n_calls=5, flush_l2=True)
    assert len(times.host_ms) == 5
    assert times.median_host_ms == pytest.approx(CALL_MS + SYNC_MS)  # flush excluded from host time too
    assert times.launch_overhead_ms == pytest.approx(SYNC_MS)


def test_without_flush_nothing_is_overwritten(fake: FakeCuda) -> None:
    times = cuda_event_times_ms(fake.call, torch.device("cuda"), n_calls=4, flush_l2=False)
    assert "flush" not in fake.log and times.flush_bytes == 0 and times.median_device_ms == CALL_MS


def fake_graphs(monkeypatch: pytest.MonkeyPatch, fake: FakeCuda, capture_error: str | None) -> list[str]:
    captured: list[str] = []

    class Graph:
        def replay(self) -> None:
            fake.log.append("replay")
            fake.now_ms += CALL_MS / 2

    @contextlib.contextmanager
    def graph(g: Graph) -> Iterator[None]:
        captured.append("capture")
        yield
        if capture_error:
            raise RuntimeError(capture_error)

    stream = types.SimpleNamespace(wait_stream=lambda other: None)
    monkeypatch.setattr(torch.cuda, "Stream", lambda device: stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    return captured


def test_cuda_graphs_capture_once_and_time_the_replay(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    captured = fake_graphs(monkeypatch, fake, capture_error=None)
    times = cuda_event_times_ms(fake.call, torch.device("cuda"), n_calls=4, flush_l2=True, cuda_graphs=True)
    assert captured == ["capture"] and fake.log.count("call") == 3  # two side-stream warm-ups and the capture
    assert fake.log.count("replay") == 4 + 4 and times.device_ms == (CALL_MS / 2,) * 4 and times.cuda_graphs


def test_a_call_that_cannot_be_captured_is_unsupported(fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_graphs(monkeypatch, fake, capture_error="operation not permitted when stream is capturing\nmore")
    with pytest.raises(UnsupportedError, match=r"^cuda_graphs: .*operation not permitted when stream is capturing\)$"):
        cuda_event_times_ms(fake.call, torch.device("cuda"), n_calls=2, cuda_graphs=True)


def test_latency_warms_up_estimates_then_times_enough_calls(fake: FakeCuda) -> None:
    times = cuda_latency(
        fake.call, torch.device("cuda"), warmup_runs=2, min_run_time_s=0.05, max_run_time_s=1.0, min_samples=10
    )
    assert len(times.device_ms) == calls_for(CALL_MS, 0.05, 1.0, 10) == 25
    assert fake.log.count("call") == 2 + cuda_timing.ESTIMATE_CALLS + 25 + cuda_timing.HOST_CALLS


@pytest.mark.parametrize(
    ("estimate_ms", "min_s", "max_s", "min_calls", "expected"),
    [
        (2.0, 0.05, 1.0, 10, 25),  # min_run_time decides
        (10.0, 0.05, 1.0, 10, 10),  # min_samples decides
        (500.0, 0.05, 1.0, 10, 2),  # the cap decides
        (5000.0, 0.05, 1.0, 10, 1),  # never zero calls
        (1e-6, 1.0, 3.0, 10, MAX_CALLS),  # never unbounded
        (0.0, 1.0, 3.0, 10, MAX_CALLS),
    ],
)
def test_calls_for(estimate_ms: float, min_s: float, max_s: float, min_calls: int, expected: int) -> None:
    assert calls_for(estimate_ms, min_s, max_s, min_calls) == expected


def test_flush_buffer_is_at_least_twice_l2() -> None:
    assert flush_bytes_for(50 * 2**20) == 256 * 2**20
    assert flush_bytes_for(200 * 2**20) == 400 * 2**20


def test_l2_size_falls_back_when_torch_does_not_report_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace())
    assert cuda_timing.l2_cache_bytes(torch.device("cuda")) == cuda_timing.FALLBACK_L2_BYTES
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(L2_cache_size=60e6))
    assert cuda_timing.l2_cache_bytes(torch.device("cuda")) == 60_000_000


@pytest.mark.cuda
def test_events_agree_with_host_on_a_gpu_bound_matmul() -> None:
    device = torch.device("cuda")
    a, b = torch.randn(4096, 4096, device=device), torch.randn(4096, 4096, device=device)
    a @ b
    times = cuda_event_times_ms(lambda: a @ b, device, n_calls=10, flush_l2=False)
    assert times.median_device_ms <= times.median_host_ms <= 1.2 * times.median_device_ms


@pytest.mark.cuda
def test_flushing_slows_a_working_set_that_fits_in_l2() -> None:
    device = torch.device("cuda")
    x = torch.randn(cuda_timing.l2_cache_bytes(device) // 16, device=device)
    x.sum()
    warm = statistics.median(cuda_event_times_ms(x.sum, device, 100, flush_l2=False).device_ms)
    cold = statistics.median(cuda_event_times_ms(x.sum, device, 100, flush_l2=True).device_ms)
    assert warm < cold
