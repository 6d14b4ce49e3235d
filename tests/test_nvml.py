"""NVML energy, clock and throttle sampling against a fake ``pynvml`` (the module is injected: no GPU needed)."""

from __future__ import annotations

import pytest
import torch

from mhabench.measure import nvml
from mhabench.measure.rounds import Block, run_rounds
from mhabench.results.schema import Energy
from mhabench.scenario.config import TimingConfig


class FakeNvml:
    """A GPU whose energy counter advances by ``watts`` × the fake clock, whose SM clock and clock-event
    reasons follow a script (one entry per read)."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1

    def __init__(self, clocks_mhz: list[float], reasons: list[int], watts: float = 500.0) -> None:
        self.now_s = 0.0
        self.watts = watts
        self.clocks_mhz = list(clocks_mhz)
        self.reasons = list(reasons)
        self.initialised = False

    def nvmlInit(self) -> None:
        self.initialised = True

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        return uuid

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"index {index}"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return round(self.watts * self.now_s * 1e3)  # mJ

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        assert clock == self.NVML_CLOCK_SM
        return int(self.clocks_mhz.pop(0))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: str) -> int:
        return self.reasons.pop(0)

    def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:
        return 700_000  # mW

    def nvmlDeviceGetApplicationsClock(self, handle: str, clock: int) -> int:
        return 1980 if clock == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPersistenceMode(self, handle: str) -> int:
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")


class FakeTimer:
    """A block of ``calls`` calls of ``per_call_s`` each, advancing the fake GPU's clock."""

    def __init__(self, gpu: FakeNvml, per_call_s: float) -> None:
        self.gpu = gpu
        self.per_call_s = per_call_s

    def block(self, calls: int) -> Block:
        self.gpu.now_s += calls * self.per_call_s
        return Block(self.per_call_s * 1e3, calls * self.per_call_s)

    def sample(self, calls: int) -> Block:
        return self.block(calls)


def sampler_for(gpu: FakeNvml) -> nvml.RoundSampler:
    return nvml.RoundSampler(gpu, "GPU-x", "nvml 580.159.04", clock=lambda: gpu.now_s)


def test_energy_clock_and_throttled_rounds_come_from_the_reads_around_each_block() -> None:
    rounds = 4
    gpu = FakeNvml(clocks_mhz=[1980, 1530, 1520, 1980], reasons=[0, 0x4, 0x4 | 0x1, 0x10], watts=600.0)
    timing = TimingConfig(min_run_time_s=1.0, max_run_time_s=1.0, min_samples=rounds)
    sampler = sampler_for(gpu)
    blocks = run_rounds({"fused": FakeTimer(gpu, 0.05)}, {"fused": 5}, timing, seed=0, sampler=sampler)
    assert len(blocks["fused"]) == rounds
    energy = sampler.energy("fused")
    assert energy.energy_per_call_j == pytest.approx(600.0 * 0.05)
    assert energy.average_power_w == pytest.approx(600.0)
    assert (energy.sm_clock_median_mhz, energy.sm_clock_min_mhz) == (1755.0, 1520.0)
    assert energy.throttled_rounds == "1,2" and energy.throttled_share == 0.5
    assert energy.clock_event_reasons == "gpu_idle,sw_power_cap,sync_boost"
    assert energy.energy_source == "nvml 580.159.04"


def test_each_implementation_gets_the_reads_of_its_own_blocks_only() -> None:
    gpu = FakeNvml(clocks_mhz=[1980] * 20, reasons=[0] * 20)
    sampler = sampler_for(gpu)
    timers = {"slow": FakeTimer(gpu, 0.01), "fast": FakeTimer(gpu, 0.001)}
    timing = TimingConfig(min_run_time_s=0.01, max_run_time_s=1.0, min_samples=3)
    blocks = run_rounds(timers, {"slow": 1, "fast": 10}, timing, seed=1, sampler=sampler)
    for name in timers:
        assert len(sampler.readings[name]) == len(blocks[name])
        assert sampler.energy(name).energy_per_call_j == pytest.approx(500.0 * timers[name].per_call_s)


def test_the_derived_figures_are_per_joule_of_one_call() -> None:
    energy = nvml.per_joule(Energy(energy_per_call_j=0.5), flops=1e12, tokens=4096)
    assert (energy.flop_per_joule, energy.tokens_per_joule) == (2e12, 8192)
    assert nvml.per_joule(Energy(energy_source="CPU device"), 1e12, 1) == Energy(energy_source="CPU device")


def test_without_a_gpu_or_without_nvml_the_sampler_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    assert nvml.open_sampler(torch.device("cpu")) == nvml.CPU_DEVICE
    monkeypatch.setattr(nvml, "load_nvml", lambda: None)
    assert nvml.open_sampler(torch.device("cuda:0")) == nvml.NO_NVML
    assert nvml.gpu_settings(torch.device("cuda:0")) == {"source": nvml.NO_NVML}


def test_an_nvml_error_is_one_line_and_no_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    assert nvml.open_sampler(torch.device("cuda:0"), Broken([], [])) == "NVML error: NVML_ERROR_DRIVER_NOT_LOADED"


def test_manifest_settings_keep_what_the_gpu_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeNvml([], [])
    monkeypatch.setattr(nvml, "_handle", lambda module, device: "GPU-x")
    settings = nvml.gpu_settings(torch.device("cuda:0"), gpu)
    assert settings == {
        "source": "nvml 580.159.04",
        "power_limit_w": 700.0,
        "application_sm_clock_mhz": 1980,
        "application_memory_clock_mhz": 2619,
    }  # persistence mode not supported here: left out, not guessed


def test_unknown_reason_bits_are_kept_by_value() -> None:
    assert nvml.reason_names(0x4 | 0x1000) == ["sw_power_cap", "0x1000"]


def test_a_row_timed_without_reads_has_only_the_source() -> None:
    sampler = sampler_for(FakeNvml([], []))
    energy = sampler.energy("never")
    assert energy == Energy(energy_source="nvml 580.159.04") and energy.energy_per_call_j is None
