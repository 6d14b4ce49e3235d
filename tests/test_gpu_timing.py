"""CUDA-event timing with a fake GPU (a host clock, a stream that runs kernels in order), and on a real GPU.

The fake models what made the first H200 check disagree: the host needs ``LAUNCH_MS`` to queue each
kernel, and the GPU runs a kernel when it has been queued *and* the previous one is done. An event
fires when the stream reaches it, so with an idle GPU a start event fires before the host has even
launched the call. The tests check that every timed call sits behind a lead (flush or spin), so its
event time is its kernel time, and that rounds interleave implementations on the device.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Iterator

import pytest
import torch

from mhabench.errors import UnsupportedError
from mhabench.measure import cuda_timing
from mhabench.measure.cuda_timing import Lead, cuda_event_times_ms, event_times_ms, flush_bytes_for
from mhabench.measure.rounds import time_in_rounds
from mhabench.scenario.config import TimingConfig

# A launch-bound call (queuing it takes longer than running it), and leads that outlast a launch, as on a GPU.
CALL_MS, FLUSH_MS, LAUNCH_MS, SYNC_MS = 0.02, 0.5, 0.05, 0.01
CYCLES_PER_MS = 1.5e6  # the calibration spin (1e6 cycles) lasts 0.67 ms
CUDA = torch.device("cuda")


class FakeGpu:
    """Just enough of torch.cuda: a host clock, and one stream that runs kernels in order."""

    def __init__(self) -> None:
        self.host_ms = 0.0
        self.free_ms = 0.0  # when the stream has run everything queued so far
        self.log: list[str] = []
        self.devices: list[str] = []

    def kernel(self, name: str, duration_ms: float) -> None:
        self.log.append(name)
        self.host_ms += LAUNCH_MS
        self.free_ms = max(self.host_ms, self.free_ms) + duration_ms

    def call(self) -> None:
        self.kernel("call", CALL_MS)

    def flush(self) -> None:
        self.kernel("flush", FLUSH_MS)

    def sleep(self, cycles: int) -> None:
        self.kernel("spin", cycles / CYCLES_PER_MS)

    def synchronize(self, device: torch.device | None = None) -> None:
        self.devices.append(str(device))
        self.host_ms = max(self.host_ms, self.free_ms) + SYNC_MS

    def clock_s(self) -> float:
        return self.host_ms / 1e3

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

            def record(self) -> None:  # fires when the stream reaches it
                fake.log.append("event")
                self.at_ms = fake.free_ms = max(fake.host_ms, fake.free_ms)

            def elapsed_time(self, end: Event) -> float:
                return end.at_ms - self.at_ms

        return Event


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    gpu = FakeGpu()
    monkeypatch.setattr(torch.cuda, "Event", gpu.event_class())
    monkeypatch.setattr(torch.cuda, "synchronize", gpu.synchronize)
    monkeypatch.setattr(torch.cuda, "device", gpu.device)
    monkeypatch.setattr(torch.cuda, "_sleep", gpu.sleep)
    monkeypatch.setattr(cuda_timing.time, "perf_counter", gpu.clock_s)
    monkeypatch.setattr(cuda_timing, "flush_lead", lambda device: Lead(gpu.flush, 123))
    return gpu


def test_each_call_is_flushed_then_bracketed_by_its_events(fake: FakeGpu) -> None:
    times = cuda_event_times_ms(fake.call, torch.device("cuda:1"), n_calls=3, flush_l2=True)
    assert times.device_ms == pytest.approx((CALL_MS,) * 3)  # the flush is outside the events
    assert fake.log[:7] == ["enter cuda:1", "flush", "event", "call", "event", "flush", "event"]
    assert fake.log[-1] == "exit cuda:1" and set(fake.devices) == {"cuda:1"}
    assert times.flush_bytes == 123 and times.flush_l2 and not times.cuda_graphs


def test_without_a_lead_an_idle_gpu_would_count_the_launch(fake: FakeGpu) -> None:
    """What the H200 saw (warm re-read slower than flushed): the start event fires before the call is queued."""
    no_lead = Lead(lambda: None, 0)
    times_ms = event_times_ms(fake.call, no_lead, 3, CUDA)
    assert times_ms[0] == pytest.approx(LAUNCH_MS + CALL_MS)  # from an idle GPU: the launch, then the kernel
    assert min(times_ms) == pytest.approx(LAUNCH_MS)  # then the host's launch rate, never the kernel's CALL_MS


def test_without_flush_a_calibrated_spin_keeps_the_gpu_busy(fake: FakeGpu) -> None:
    times = cuda_event_times_ms(fake.call, CUDA, n_calls=4, flush_l2=False)
    assert times.device_ms == pytest.approx((CALL_MS,) * 4)  # the launch gap hides behind the spin, as behind a flush
    assert "flush" not in fake.log and times.flush_bytes == 0 and not times.flush_l2
    assert fake.log.count("spin") == 2 + 4 + 4  # calibration, the timed calls, the host-timed calls
    lead = cuda_timing.spin_lead(CUDA)
    before = fake.free_ms = fake.host_ms
    lead.run()
    assert fake.free_ms - before - LAUNCH_MS == pytest.approx(cuda_timing.SPIN_LEAD_MS)


def test_host_time_is_launch_run_and_synchronize(fake: FakeGpu) -> None:
    times = cuda_event_times_ms(fake.call, CUDA, n_calls=5, flush_l2=True)
    assert len(times.host_ms) == 5  # min(n_calls, HOST_CALLS)
    assert times.median_host_ms == pytest.approx(LAUNCH_MS + CALL_MS + SYNC_MS)  # the flush is not counted
    assert times.median_host_ms - times.median_device_ms == pytest.approx(LAUNCH_MS + SYNC_MS)


def fake_graphs(monkeypatch: pytest.MonkeyPatch, fake: FakeGpu, capture_error: str | None) -> list[str]:
    captured: list[str] = []

    class Graph:
        def replay(self) -> None:
            fake.kernel("replay", CALL_MS / 2)

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


def test_cuda_graphs_capture_once_and_time_the_replay(fake: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    captured = fake_graphs(monkeypatch, fake, capture_error=None)
    times = cuda_event_times_ms(fake.call, CUDA, n_calls=4, flush_l2=True, cuda_graphs=True)
    assert captured == ["capture"] and fake.log.count("call") == 3  # two side-stream warm-ups and the capture
    assert fake.log.count("replay") == 4 + 4 and times.device_ms == pytest.approx((CALL_MS / 2,) * 4)
    assert times.cuda_graphs


def test_a_call_that_cannot_be_captured_is_unsupported(fake: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_graphs(monkeypatch, fake, capture_error="operation not permitted when stream is capturing\nmore")
    with pytest.raises(UnsupportedError, match=r"^cuda_graphs: .*operation not permitted when stream is capturing\)$"):
        cuda_event_times_ms(fake.call, CUDA, n_calls=2, cuda_graphs=True)


ROUNDS_TIMING = TimingConfig(min_run_time_s=0.0004, max_run_time_s=1.0, min_samples=4, warmup_runs=1)


def test_rounds_on_cuda_take_event_medians_and_one_host_call_per_round(fake: FakeGpu) -> None:
    """Blocks of 0.1 ms / 0.02 ms = 5 event-timed calls per sample, 4 rounds, a host-timed call after each block."""
    timed = time_in_rounds(
        {"a": fake.call, "b": fake.call}, torch.device("cuda:1"), ROUNDS_TIMING, 0, clock=fake.clock_s
    )
    for result in timed.values():
        latency = result.latency
        assert latency.times_ms == pytest.approx((CALL_MS,) * 4)
        assert latency.calls_per_sample == 5 and result.warmup.settled
        assert latency.host_latency_ms == pytest.approx(LAUNCH_MS + CALL_MS + SYNC_MS)
    assert fake.log[0] == "enter cuda:1" and fake.log[-1] == "exit cuda:1" and set(fake.devices) == {"cuda:1"}
    warmup_calls = sum(result.warmup.calls for result in timed.values())
    assert fake.log.count("call") == warmup_calls + 2 * 4 * (5 + 1)  # two arms, four rounds, a block and a host call


def test_rounds_can_time_one_call_warm_and_flushed(fake: FakeGpu) -> None:
    """The L2 check's arms: a flush before each flushed call, a spin before each warm one, in the same rounds."""
    timed = time_in_rounds(
        {"warm": fake.call, "flushed": fake.call},
        CUDA,
        ROUNDS_TIMING,
        0,
        flush_l2={"warm": False, "flushed": True},
        clock=fake.clock_s,
    )
    medians = {name: result.latency.latency_ms for name, result in timed.items()}
    assert medians == {"warm": pytest.approx(CALL_MS), "flushed": pytest.approx(CALL_MS)}
    before_calls = [
        fake.log[i - 2] for i, entry in enumerate(fake.log) if entry == "call" and fake.log[i - 1] == "event"
    ]
    assert set(before_calls) == {"spin", "flush"} and fake.log.count("spin") - 2 == fake.log.count("flush")


def test_one_call_timed_in_rounds_on_cuda_keeps_the_host_figure(fake: FakeGpu) -> None:
    latency = time_in_rounds({"call": fake.call}, CUDA, ROUNDS_TIMING, 0)["call"].latency
    assert latency.latency_ms == pytest.approx(CALL_MS)
    assert latency.host_latency_ms == pytest.approx(LAUNCH_MS + CALL_MS + SYNC_MS)


def test_flush_buffer_is_at_least_twice_l2() -> None:
    assert flush_bytes_for(50 * 2**20) == 256 * 2**20
    assert flush_bytes_for(200 * 2**20) == 400 * 2**20


def test_l2_size_falls_back_when_torch_does_not_report_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace())
    assert cuda_timing.l2_cache_bytes(CUDA) == cuda_timing.FALLBACK_L2_BYTES
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(L2_cache_size=60e6))
    assert cuda_timing.l2_cache_bytes(CUDA) == 60_000_000


def test_sm_clock_is_nan_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_nvml(device: torch.device) -> int:
        raise ModuleNotFoundError("pynvml")

    monkeypatch.setattr(torch.cuda, "clock_rate", no_nvml)
    assert math.isnan(cuda_timing.sm_clock_mhz(CUDA))


@pytest.mark.cuda
def test_events_agree_with_host_on_a_gpu_bound_matmul() -> None:
    """Device and host samples taken in the same rounds: host = device + launch and synchronize (< 10 %)."""
    a, b = torch.randn(4096, 4096, device=CUDA), torch.randn(4096, 4096, device=CUDA)
    timing = TimingConfig(min_run_time_s=0.2, flush_l2=False)
    latency = time_in_rounds({"mm": lambda: a @ b}, CUDA, timing, 0)["mm"].latency
    assert 0.98 * latency.latency_ms <= latency.host_latency_ms <= 1.1 * latency.latency_ms


@pytest.mark.cuda
def test_flushing_slows_a_working_set_that_fits_in_l2() -> None:
    """A quarter of L2 re-read warm and flushed, in the same rounds, the GPU busy before every call in both."""
    x = torch.randn(cuda_timing.l2_cache_bytes(CUDA) // 16, device=CUDA)
    timing = TimingConfig(min_run_time_s=0.05, max_run_time_s=0.5)
    timed = time_in_rounds(
        {"warm": x.sum, "flushed": x.sum}, CUDA, timing, 0, flush_l2={"warm": False, "flushed": True}
    )
    assert timed["warm"].latency.latency_ms < timed["flushed"].latency.latency_ms
