"""Peak memory (dispatch-mode storage tracker), SDPA backend detection, latency, roofline peaks."""

from __future__ import annotations

import math
import time

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from mhabench import AttentionWeights, build
from mhabench.measure.memory import LiveStorageTracker, sdpa_backend
from mhabench.measure.peaks import DevicePeaks, datasheet_peaks, device_peaks
from mhabench.measure.rounds import time_in_rounds
from mhabench.measure.trackers import CudaMemoryTracker, DispatchTracker, Stopwatch
from mhabench.pattern import CAUSAL
from mhabench.results.schema import MIN_SPREAD_SAMPLES, LatencyStats, Memory
from mhabench.scenario.config import TimingConfig

MiB = 2**20
CPU = torch.device("cpu")


def peak_memory(fn: object, device: torch.device) -> tuple[float, str]:
    """One call of ``fn`` under the tracker the runner uses on ``device``: (peak bytes, method)."""
    if device.type == "cuda":
        with CudaMemoryTracker(device) as cuda:
            fn()
        return cuda.result().peak_memory_bytes, cuda.result().memory_method
    with DispatchTracker() as tracker:
        fn()
    return tracker.cpu_memory().peak_memory_bytes, tracker.cpu_memory().memory_method


def ops_called(fn: object) -> set[str]:
    with DispatchTracker() as tracker:
        fn()
    return tracker.ops


def test_naive_shows_its_score_matrix_and_fused_does_not() -> None:
    """b=1, h=8, n=2048, D=512 fp32: naive's 8×2048×2048 scores are 128 MiB per copy."""
    weights = AttentionWeights.random(512)
    x = torch.randn(1, 2048, 512)
    peaks = {}
    for name in ("naive", "fused"):
        module = build(name, weights, 8)
        with torch.no_grad():  # not inference_mode: it hides the decomposed ops from the dispatch mode
            peaks[name], method = peak_memory(lambda module=module: module(x), CPU)
        assert method == "dispatch_storage_tracker"
    assert peaks["naive"] >= 128 * MiB
    assert peaks["fused"] < 64 * MiB
    # outputs at least: the (1, 2048, 512) fp32 result is 4 MiB
    assert peaks["fused"] >= 4 * MiB


def test_tracker_counts_live_bytes_not_total_allocations() -> None:
    def sequential() -> torch.Tensor:
        a = torch.ones(MiB // 4)  # 1 MiB
        b = a + 1  # 2 MiB live
        del a
        c = b * 2  # still 2 MiB live: a is gone
        del b
        return c

    def together() -> list[torch.Tensor]:
        return [torch.ones(MiB // 4) for _ in range(3)]

    assert peak_memory(sequential, CPU) == (2 * MiB, "dispatch_storage_tracker")
    assert peak_memory(together, CPU)[0] == 3 * MiB


def test_tracker_ignores_tensors_created_before_it() -> None:
    existing = torch.ones(MiB)
    tracker = LiveStorageTracker()
    with tracker:
        view = existing[:10].view(2, 5)  # a view shares a storage but still dispatches
        existing.add_(1)
    assert view.shape == (2, 5)
    assert tracker.peak_bytes == 0  # a view and an in-place write allocate nothing


@pytest.mark.parametrize(("name", "expected"), [("fused", "flash"), ("torch_mha", "flash"), ("naive", "")])
def test_sdpa_backend_on_cpu(name: str, expected: str) -> None:
    module = build(name, AttentionWeights.random(32), 4)
    x = torch.randn(1, 16, 32)
    with torch.no_grad():
        assert sdpa_backend(ops_called(lambda: module(x))) == expected


def test_sdpa_backend_sees_a_forced_math_backend() -> None:
    module = build("fused", AttentionWeights.random(32), 4, CAUSAL)
    x = torch.randn(1, 16, 32)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        assert sdpa_backend(ops_called(lambda: module(x))) == "math"


def test_sdpa_backend_names() -> None:
    assert sdpa_backend(set()) == ""
    assert sdpa_backend({"mm", "_scaled_dot_product_efficient_attention"}) == "efficient"
    assert sdpa_backend({"_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention"}) == "cudnn,flash"


def test_dispatch_tracker_reports_the_backend_and_counts_every_dispatched_op() -> None:
    module, x = build("fused", AttentionWeights.random(32), 4), torch.randn(1, 16, 32)
    with torch.no_grad(), DispatchTracker() as once:
        module(x)
    with torch.no_grad(), DispatchTracker() as twice:
        module(x)
        module(x)
    assert once.result().sdpa_backend == "flash"
    assert once.result().ops_per_call > 0
    assert twice.result().ops_per_call == 2 * once.result().ops_per_call
    assert once.cpu_memory().peak_memory_bytes >= x.numel() * x.element_size()  # at least the output


def test_dispatch_tracker_counts_the_storages_a_call_allocates() -> None:
    """Two new tensors; a view and an in-place write allocate nothing; inputs made before the call are not counted."""
    x = torch.ones(4, 4)

    def call() -> torch.Tensor:
        y = x + 1  # allocates
        y.t().add_(1)  # a view, written in place: no new storage
        return (y @ y).relu_()  # the product allocates, relu_ writes it in place

    with torch.no_grad(), DispatchTracker() as tracker:
        call()
    assert tracker.result().allocations_per_call == 2
    assert tracker.result().ops_per_call >= 4  # every op is dispatched, allocating or not


class FakeCudaAllocator:
    """Stands in for torch.cuda's allocator statistics, so the tracker's arithmetic is tested without a GPU."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, allocated: int, peak: int) -> None:
        self.events: list[str] = []
        self.allocated, self.peak = allocated, peak
        for name in ("synchronize", "memory_allocated", "reset_peak_memory_stats", "max_memory_allocated"):
            monkeypatch.setattr(torch.cuda, name, getattr(self, name))

    def synchronize(self, device: torch.device) -> None:
        self.events.append("synchronize")

    def memory_allocated(self, device: torch.device) -> int:
        return self.allocated

    def reset_peak_memory_stats(self, device: torch.device) -> None:
        self.events.append("reset")

    def max_memory_allocated(self, device: torch.device) -> int:
        return self.peak


def test_cuda_memory_tracker_is_the_peak_above_what_was_allocated_before(monkeypatch: pytest.MonkeyPatch) -> None:
    allocator = FakeCudaAllocator(monkeypatch, allocated=100 * MiB, peak=100 * MiB)
    with CudaMemoryTracker(torch.device("cuda:0")) as tracker:
        allocator.events.append("call")
        allocator.peak = 164 * MiB  # the call's own 64 MiB on top of the 100 MiB of weights and inputs
    assert tracker.result() == Memory(peak_memory_bytes=64 * MiB, memory_method="cuda_allocator")
    assert allocator.events == ["synchronize", "reset", "call", "synchronize"]


def test_stopwatch_times_the_block_and_waits_for_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    with Stopwatch(CPU) as watch:
        time.sleep(0.02)
    assert 0.02 <= watch.seconds < 1.0
    synced: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    with Stopwatch(torch.device("cuda:0")) as gpu_watch:
        pass
    assert synced == [torch.device("cuda:0")] and gpu_watch.seconds >= 0


def test_one_call_timed_in_rounds_returns_enough_consistent_samples() -> None:
    """Blocks of min_run_time_s / min_samples (2 ms) after a warm-up: 5 samples fit well within the cap."""
    timing = TimingConfig(min_run_time_s=0.01, max_run_time_s=0.5, min_samples=5, warmup_runs=2)
    calls = []
    a = torch.randn(32, 32)

    def fn() -> torch.Tensor:
        calls.append(1)
        return a @ a

    latency = time_in_rounds({"fn": fn}, CPU, timing, 0)["fn"].latency
    assert len(latency.times_ms) >= timing.min_samples
    assert all(t > 0 for t in latency.times_ms)
    assert latency.latency_p25_ms <= latency.latency_ms <= latency.latency_p75_ms
    assert min(latency.times_ms) <= latency.latency_mean_ms <= max(latency.times_ms)
    assert latency.calls_per_sample >= 1 and latency.samples == len(latency.times_ms)
    iqr_ms = latency.latency_p75_ms - latency.latency_p25_ms
    assert latency.noisy == (iqr_ms / latency.latency_ms > timing.noise_threshold)
    assert math.isnan(latency.compile_time_s)  # nothing compiled
    assert len(calls) >= timing.warmup_runs + len(latency.times_ms) * latency.calls_per_sample


def test_one_call_timed_in_rounds_stops_at_the_cap(tiny_timing: TimingConfig) -> None:
    """min_samples is wanted within max_run_time_s: a slow call gets fewer samples, not a longer run."""
    sleepy = TimingConfig(**{**tiny_timing.model_dump(), "min_samples": 50, "max_run_time_s": 0.03})
    latency = time_in_rounds({"sleep": lambda: time.sleep(0.005)}, CPU, sleepy, 0)["sleep"].latency
    assert 1 <= len(latency.times_ms) < 50  # 50 samples of ≥ 5 ms cannot fit in a 30 ms cap
    assert latency.latency_ms >= 5.0


def test_latency_statistics_and_noisy_flag() -> None:
    def stats(times_ms: tuple[float, ...], noise_threshold: float) -> LatencyStats:
        return LatencyStats.from_samples(times_ms, 1, noise_threshold, compile_time_s=float("nan"))

    steady = stats((1.0, 1.025, 1.05, 1.075, 1.1), 0.1)
    assert steady.latency_ms == pytest.approx(1.05)
    assert (steady.latency_p25_ms, steady.latency_p75_ms) == (pytest.approx(1.025), pytest.approx(1.075))
    assert steady.samples == 5 and steady.latency_mean_ms == pytest.approx(1.05)
    assert steady.noisy is False  # 0.05 / 1.05 ≈ 4.8 % ≤ 10 %
    assert stats(steady.times_ms, 0.04).noisy is True
    assert stats((1.0, 1.0, 1.0, 2.0, 2.0, 2.0), 0.1).noisy is True  # IQR 1.0 / median 1.5
    assert stats((2.0,) * 5, 0.1).noisy is False


def test_noisy_is_undefined_below_the_spread_minimum() -> None:
    """Below MIN_SPREAD_SAMPLES the quartiles lean on the extremes (one sample: IQR 0 by construction), so there
    is no flag either way, where it used to read False for one sample and True for a wide pair."""

    def noisy(times_ms: tuple[float, ...]) -> bool | None:
        return LatencyStats.from_samples(times_ms, 1, 0.1, compile_time_s=float("nan")).noisy

    assert MIN_SPREAD_SAMPLES == 5
    assert noisy((1.0,)) is None and noisy((1.0, 2.0, 1.0, 2.0)) is None
    assert noisy((1.0, 2.0, 1.0, 2.0, 1.5)) is True and noisy((1.0,) * 5) is False
    # from 5 samples on, one outlier at either end does not move the IQR
    assert noisy((1.0, 1.0, 1.0, 1.0, 1000.0)) is False and noisy((0.001, 1.0, 1.0, 1.0, 1.0)) is False


def test_roofline_arithmetic() -> None:
    peaks = DevicePeaks(peak_tflops=2.0, peak_gbps=100.0, source="test")
    assert peaks.ridge_flops_per_byte == pytest.approx(20.0)
    assert peaks.attainable_tflops(5.0) == pytest.approx(0.5)  # memory roof: 5 FLOP/B × 100 GB/s
    assert peaks.attainable_tflops(1000.0) == pytest.approx(2.0)  # compute roof
    assert (peaks.bound(5.0), peaks.bound(50.0)) == ("memory", "compute")


def test_datasheet_table() -> None:
    pcie = datasheet_peaks("NVIDIA H100 PCIe", torch.bfloat16)
    sxm = datasheet_peaks("NVIDIA H100 80GB HBM3", torch.bfloat16)
    assert (pcie.peak_tflops, pcie.peak_gbps, pcie.source) == (756.0, 2000.0, "datasheet:H100 PCIe")
    assert (sxm.peak_tflops, sxm.source) == (989.0, "datasheet:H100 SXM")
    assert datasheet_peaks("NVIDIA A100-SXM4-80GB", torch.float32).peak_tflops == 19.5
    assert datasheet_peaks("Some CPU", torch.float32) is None


def test_cpu_peaks_are_measured_never_looked_up(monkeypatch: pytest.MonkeyPatch) -> None:
    sentinel = DevicePeaks(1.0, 1.0, "measured")
    monkeypatch.setattr("mhabench.measure.peaks.measured_peaks", lambda device, dtype: sentinel)
    assert device_peaks(CPU, torch.float32) is sentinel


@pytest.mark.cuda
def test_fused_on_cuda_uses_the_allocator() -> None:
    device = torch.device("cuda")
    weights = AttentionWeights.random(256, dtype=torch.bfloat16, device=device)
    module = build("fused", weights, 4)
    x = torch.randn(2, 128, 256, dtype=torch.bfloat16, device=device)
    with torch.no_grad():
        peak_bytes, method = peak_memory(lambda: module(x), device)
    assert method == "cuda_allocator"
    # the output and the packed QKV activation are allocated by the call: at least 4 × the input
    assert peak_bytes >= 4 * x.numel() * x.element_size()


def test_an_opaque_fused_op_is_named_in_the_memory_method() -> None:
    """nn.MultiheadAttention with bias runs as one op under no_grad: its intermediates are invisible."""
    module = build("torch_mha", AttentionWeights.random(32, bias=True), heads=4)
    x = torch.randn(1, 16, 32)
    with torch.no_grad():
        _, method = peak_memory(lambda: module(x), CPU)
        backend = sdpa_backend(ops_called(lambda: module(x)))
    assert method == "dispatch_storage_tracker (outputs only inside _native_multi_head_attention)"
    assert backend == "native_mha"


def test_views_and_in_place_writes_of_existing_tensors_allocate_nothing() -> None:
    """Weights and caches that exist before the call must not enter its peak through a view of them."""
    MiB = 2**20
    weight = torch.randn(MiB // 4)  # 1 MiB, allocated before the call
    cache = torch.zeros(MiB // 4)

    def views_only() -> torch.Tensor:
        cache[:8].copy_(weight[:8])  # in-place write into an existing tensor
        return weight.view(512, -1).t()[:, :4]

    assert peak_memory(views_only, CPU)[0] == 0
    assert peak_memory(lambda: weight.view(512, -1).t().contiguous(), CPU)[0] == MiB  # a real copy counts


def test_decode_step_peak_excludes_the_preallocated_cache() -> None:
    """One decode step's peak is the new token's activations, not the KV cache filled before it."""
    from mhabench.impls import get_spec
    from mhabench.run.inputs import make_inputs
    from mhabench.run.steps import prepare
    from mhabench.scenario.cases import expand_cases
    from mhabench.scenario.loading import parse_config

    config = parse_config({"scenarios": [{"seq_len": 256, "d_model": 64, "heads": 4, "phase": "decode"}]}, "x.yaml")
    case = expand_cases(config, CPU)[0]
    inputs = make_inputs(case, CPU)
    _, step = prepare(get_spec("fused"), case, inputs.weights, inputs.x)
    with torch.no_grad():
        peak_bytes, _ = peak_memory(step.run, CPU)
    assert step.kv_cache_bytes == 2 * 257 * 64 * 4
    assert 0 < peak_bytes < step.kv_cache_bytes / 4


@pytest.mark.parametrize(
    ("compiles", "whole_layer", "kernels"), [(False, True, 3), (True, True, None), (False, False, None)]
)
def test_device_call_measures_memory_and_kernels_in_one_cuda_call(
    monkeypatch: pytest.MonkeyPatch, compiles: bool, whole_layer: bool, kernels: int | None
) -> None:
    """CUDA: one extra call gives the allocator peak and, for an eager whole layer, the kernel count."""
    import dataclasses

    from mhabench.impls import get_spec
    from mhabench.results.schema import Dispatch
    from mhabench.run import case as case_runner

    allocator = FakeCudaAllocator(monkeypatch, allocated=10 * MiB, peak=10 * MiB)
    calls: list[str] = []

    def call() -> None:
        calls.append("call")
        allocator.peak = 42 * MiB

    def profiled(fn: object, device: torch.device) -> int:
        calls.append("profiler")
        fn()  # type: ignore[operator]
        return 3

    monkeypatch.setattr(case_runner, "count_cuda_kernels", profiled)
    spec = dataclasses.replace(get_spec("fused"), compiles=compiles)
    groups = case_runner.device_call(spec, call, torch.device("cuda:0"), whole_layer)
    assert groups == [
        Memory(peak_memory_bytes=32 * MiB, memory_method="cuda_allocator"),
        Dispatch(kernels_per_call=kernels),
    ]
    assert calls == (["profiler", "call"] if kernels else ["call"])


def test_device_call_on_the_cpu_makes_no_call() -> None:
    """The CPU's peak comes from the checked call: nothing to add, no second call."""
    from mhabench.impls import get_spec
    from mhabench.run import case as case_runner

    def call() -> None:
        raise AssertionError("the CPU peak comes from the checked call: no second call")

    assert case_runner.device_call(get_spec("naive"), call, CPU, whole_layer=True) == []


@pytest.mark.cuda
def test_device_call_on_a_gpu_matches_separate_memory_and_kernel_measurements() -> None:
    """The profiler around the memory call changes neither the peak nor the count."""
    from mhabench.impls import get_spec
    from mhabench.measure.op_counts import count_cuda_kernels
    from mhabench.run import case as case_runner

    device = torch.device("cuda")
    module = build("naive", AttentionWeights.random(512, dtype=torch.bfloat16, device=device), 8)
    x = torch.randn(2, 1024, 512, dtype=torch.bfloat16, device=device)
    with torch.no_grad():
        module(x)  # lazy set-up (cuBLAS handles) before anything is measured
        alone_peak, _ = peak_memory(lambda: module(x), device)
        alone_kernels = count_cuda_kernels(lambda: module(x), device)
    memory, dispatch = case_runner.device_call(get_spec("naive"), lambda: module(x), device, whole_layer=True)
    assert memory == Memory(peak_memory_bytes=alone_peak, memory_method="cuda_allocator")
    assert dispatch.kernels_per_call == alone_kernels
    assert alone_peak >= 2 * 8 * 1024 * 1024 * 2  # naive's (2, 8, 1024, 1024) bf16 scores, at least once
