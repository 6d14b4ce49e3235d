"""NVML energy, clock and throttle sampling against a fake ``pynvml`` (the module is injected: no GPU needed)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from mhabench.impls import get_spec
from mhabench.measure import nvml
from mhabench.measure.peaks import DevicePeaks
from mhabench.measure.roofline import executed_tflops
from mhabench.measure.rounds import Block, run_rounds
from mhabench.results.gpu_groups import Energy
from mhabench.results.schema import CaseIdentity, LatencyStats, ModelledCost, Outcome, ResultRow, Roofline
from mhabench.run.placement import finished
from mhabench.scenario.cases import Case, expand_cases
from mhabench.scenario.config import RunConfig, TimingConfig


class FakeNvml:
    """A GPU whose energy counter adds ``watts`` (or a run's own power) × the time each fake run takes, whose SM
    clock and clock-event reasons follow a script (one entry per read), and which counts NVML's init/shutdown."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1

    def __init__(self, clocks_mhz: list[float], reasons: list[int], watts: float = 500.0) -> None:
        self.now_s = 0.0
        self.energy_mj = 0.0
        self.watts = watts
        self.clocks_mhz = list(clocks_mhz)
        self.reasons = list(reasons)
        self.inits = 0
        self.uuids: set[str] = set()

    def run(self, seconds: float, watts: float | None = None) -> None:
        """The GPU busy for ``seconds`` at ``watts`` (its default power when None)."""
        self.now_s += seconds
        self.energy_mj += (self.watts if watts is None else watts) * seconds * 1e3

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.inits -= 1

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        if self.uuids and uuid not in self.uuids:
            raise RuntimeError("Not Found")
        return uuid

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"index {index}"

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return round(self.energy_mj)

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
        self.gpu.run(calls * self.per_call_s)
        return Block(self.per_call_s * 1e3, calls * self.per_call_s)

    def sample(self, calls: int) -> Block:
        return self.block(calls)


def sampler_for(gpu: FakeNvml) -> nvml.RoundSampler:
    return nvml.RoundSampler(gpu, "GPU-x", "nvml 580.159.04")


def test_clock_and_throttled_rounds_come_from_the_reads_after_each_block() -> None:
    rounds = 4
    gpu = FakeNvml(clocks_mhz=[1980, 1530, 1520, 1980], reasons=[0, 0x4, 0x4 | 0x1, 0x10], watts=600.0)
    timing = TimingConfig(min_run_time_s=1.0, max_run_time_s=1.0, min_samples=rounds)
    sampler = sampler_for(gpu)
    blocks = run_rounds({"fused": FakeTimer(gpu, 0.05)}, {"fused": 5}, timing, seed=0, sampler=sampler)
    assert len(blocks["fused"]) == rounds
    energy = sampler.energy("fused")
    assert (energy.sm_clock_median_mhz, energy.sm_clock_min_mhz) == (1755.0, 1520.0)
    assert energy.sm_clock_rounds_mhz == "1980,1530,1520,1980"  # per round, for a slow round's clock
    assert energy.throttled_rounds == "1,2" and energy.throttled_share == 0.5
    assert energy.clock_event_reasons == "gpu_idle,sw_power_cap,sync_boost"
    # the blocks' energy is never a row's: they are shorter than the counter's steps
    assert energy.energy_per_call_j is None and energy.average_power_w is None
    assert energy.energy_source == f"nvml 580.159.04; {nvml.ENERGY_OFF}"


def test_each_implementation_gets_the_reads_of_its_own_blocks_only() -> None:
    gpu = FakeNvml(clocks_mhz=[1980] * 20, reasons=[0] * 20)
    sampler = sampler_for(gpu)
    timers = {"slow": FakeTimer(gpu, 0.01), "fast": FakeTimer(gpu, 0.001)}
    timing = TimingConfig(min_run_time_s=0.01, max_run_time_s=1.0, min_samples=3)
    blocks = run_rounds(timers, {"slow": 1, "fast": 10}, timing, seed=1, sampler=sampler)
    for name in timers:
        assert len(sampler.readings[name]) == len(blocks[name])


def test_the_windows_energy_columns_go_over_the_rounds_clock_columns() -> None:
    rounds = Energy(sm_clock_median_mhz=1980.0, energy_source="nvml x; off")
    windows = Energy(energy_per_call_j=0.5, energy_windows=3, energy_source="nvml x")
    merged = nvml.with_windows(rounds, windows)
    assert merged == Energy(sm_clock_median_mhz=1980.0, energy_per_call_j=0.5, energy_windows=3, energy_source="nvml x")


def test_the_derived_figures_are_per_joule_of_one_call() -> None:
    energy = nvml.per_joule(Energy(energy_per_call_j=0.5), flops=1e12, tokens=4096)
    assert (energy.flop_per_joule, energy.tokens_per_joule) == (2e12, 8192)
    assert nvml.per_joule(Energy(energy_source="CPU device"), 1e12, 1) == Energy(energy_source="CPU device")


def test_without_a_gpu_or_without_nvml_the_sampler_is_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    with nvml.open_sampler(torch.device("cpu")) as sampler:
        assert sampler == nvml.CPU_DEVICE
    monkeypatch.setattr(nvml, "load_nvml", lambda: None)
    with nvml.open_sampler(torch.device("cuda:0")) as sampler:
        assert sampler == nvml.NO_NVML
    assert nvml.gpu_settings(torch.device("cuda:0")) == {"source": nvml.NO_NVML}


def test_an_nvml_error_is_one_line_and_no_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken(FakeNvml):
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML_ERROR_DRIVER_NOT_LOADED")

    with nvml.open_sampler(torch.device("cuda:0"), Broken([], [])) as sampler:
        assert sampler == "NVML error: NVML_ERROR_DRIVER_NOT_LOADED"


def test_every_nvml_init_is_shut_down_even_when_the_block_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeNvml([], [])
    monkeypatch.setattr(nvml, "_handle", lambda module, device: "GPU-x")
    with nvml.open_sampler(torch.device("cuda:0"), gpu) as sampler:
        assert isinstance(sampler, nvml.RoundSampler) and gpu.inits == 1
    assert gpu.inits == 0
    with pytest.raises(RuntimeError, match="timing failed"), nvml.open_sampler(torch.device("cuda:0"), gpu):
        raise RuntimeError("timing failed")
    assert gpu.inits == 0
    nvml.gpu_settings(torch.device("cuda:0"), gpu)
    assert gpu.inits == 0


class Props:
    def __init__(self, uuid: str) -> None:
        self.uuid = uuid


@pytest.mark.parametrize(
    ("torch_uuid", "owned", "handle"),
    [
        ("GPU-1234", "GPU-1234", "GPU-1234"),
        ("1234", "GPU-1234", "GPU-1234"),
        ("MIG-abcd", "MIG-abcd", "MIG-abcd"),
        ("abcd", "MIG-abcd", "MIG-abcd"),  # a MIG instance's bare UUID: never looked up as GPU-abcd successfully
    ],
)
def test_the_handle_is_looked_up_under_the_prefix_its_device_owns(
    monkeypatch: pytest.MonkeyPatch, torch_uuid: str, owned: str, handle: str
) -> None:
    gpu = FakeNvml([], [])
    gpu.uuids = {owned}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props(torch_uuid))
    assert nvml._handle(gpu, torch.device("cuda:0")) == handle


def test_a_uuid_no_device_owns_is_nvmls_error(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeNvml([], [])
    gpu.uuids = {"GPU-other"}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props("abcd"))
    with nvml.open_sampler(torch.device("cuda:0"), gpu) as sampler:
        assert sampler == "NVML error: Not Found"
    assert gpu.inits == 0


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


# --- per joule: executed FLOPs and real tokens ------------------------------------------------------


def padded_documents_case() -> Case:
    """Two documents of 3 and 8 tokens padded to 8, causal within each: 16 query tokens computed, 11 real."""
    config = RunConfig.model_validate(
        {
            "dtype": "float32",
            "scenarios": [
                {"name": "docs", "seq_len": 8, "d_model": 8, "heads": 2, "mask": "document", "lengths": [[3, 8]]}
            ],
        }
    )
    (case,) = expand_cases(config, torch.device("cpu"))
    return case


@pytest.mark.parametrize(("impl", "skips"), [("flex", True), ("naive", False)])
def test_flop_per_joule_counts_executed_flops_and_tokens_per_joule_real_tokens(impl: str, skips: bool) -> None:
    case = padded_documents_case()
    work = case.workload()
    cost_fn = get_spec("naive").cost
    assert cost_fn is not None
    cost = ModelledCost.from_cost(cost_fn(work))
    assert cost.useful_flops < cost.flops and work.real_tokens == 11 < work.tokens == 16
    row = ResultRow(CaseIdentity.of(case, impl=impl), Outcome("ok", "")).with_groups(
        cost, LatencyStats.from_samples((2.0,), 1, 0.1, math.nan), Energy(energy_per_call_j=0.5, energy_source="nvml x")
    )
    done = finished(row, case, DevicePeaks(100.0, 1000.0, "test"))
    assert done.roofline is not None and done.roofline.skips_masked_work is skips
    executed = cost.useful_flops if skips else cost.flops  # a skipping kernel never ran the masked blocks' FLOPs
    assert done.energy is not None
    assert done.energy.flop_per_joule == pytest.approx(executed / 0.5)
    assert done.energy.tokens_per_joule == pytest.approx(11 / 0.5)


def test_the_executed_rate_is_the_hardwares_where_ncu_counted_it() -> None:
    point = Roofline(
        achieved_tflops=2.0, achieved_useful_tflops=1.0, skips_masked_work=True, intensity_source="hardware"
    )
    assert executed_tflops(point) == 2.0
    assert executed_tflops(dataclasses.replace(point, intensity_source="modelled")) == 1.0
    assert executed_tflops(dataclasses.replace(point, intensity_source="modelled", skips_masked_work=False)) == 2.0
