"""The groups a GPU fills beside the timing: its own hardware counters (Nsight Compute) and its energy,
clocks and throttling (NVML). On the CPU every column here is empty and its source column says why.
"""

from __future__ import annotations

import dataclasses

from mhabench.results.column import column


@dataclasses.dataclass(frozen=True)
class HardwareCounters:
    """What the GPU's own counters saw over one call of the row's step (Nsight Compute, after timing).

    The call runs in a separate process launched under ``ncu`` once the case's rounds are over, so no timed
    call is ever replayed by the profiler (docs/measurement.md, "Hardware counters").
    """

    dram_read_bytes: int = column(
        "DRAM (HBM) bytes read by the kernels of one call (dram__bytes_read.sum)",
        role="measured",
        unit="bytes",
        label="DRAM read",
    )
    dram_write_bytes: int = column(
        "DRAM (HBM) bytes written by the kernels of one call (dram__bytes_write.sum)",
        role="measured",
        unit="bytes",
        label="DRAM write",
    )
    l2_bytes: int = column(
        "L2 traffic of one call (lts__t_bytes.sum): what the SMs asked of L2, hits and misses",
        role="measured",
        unit="bytes",
        label="L2 bytes",
    )
    tensor_flops: int = column(
        "tensor-core FLOPs of one call (sm__ops_path_tensor_* for the row's dtype; 2 per FMA)",
        role="measured",
        unit="FLOP",
        label="tensor FLOPs",
    )
    fp32_flops: int = column(
        "non-tensor FP32 FLOPs of one call: 2 × FFMA + FADD + FMUL thread instructions (half precision and "
        "special functions not included); empty unless asked for (counters_fp32) and given by ncu",
        role="measured",
        unit="FLOP",
        label="FP32 FLOPs",
    )
    kernels_profiled: int = column(
        "kernels the profiled call launched (kernel replay; empty under range replay, which profiles the call whole)",
        role="measured",
        label="kernels (ncu)",
    )
    kernel_time_ms: float = column(
        "sum of the profiled kernels' durations under ncu, or the range's under range replay (replayed, clocks "
        "unlocked): not the latency",
        role="measured",
        unit="ms",
        label="ncu kernel ms",
    )
    hardware_intensity: float = column(
        "(tensor_flops + fp32_flops) / (dram_read_bytes + dram_write_bytes); fp32_flops as 0 where not counted "
        "(counters_fp32: false)",
        role="measured",
        unit="FLOP/byte",
        label="hw FLOP/B",
    )
    hardware_counted_bytes_ratio: float = column(
        "(dram_read_bytes + dram_write_bytes) / measured_bytes: DRAM traffic over the bytes counted from the ops",
        role="derived",
        unit="ratio",
        label="hw/counted bytes",
    )
    counters_source: str = column(
        "ncu <version> where the counters were read (', range replay: …' where each call was replayed whole; "
        "', L2 warm across replay passes' without flush_l2), else why they are empty (not requested, CPU device, "
        "no ncu, no permission (ERR_NVGPUCTRPERM), the profiler's error)",
        role="measured",
        label="counters from",
    )


@dataclasses.dataclass(frozen=True)
class Energy:
    """GPU energy per call over the row's own energy windows; SM clock and clock-event reasons over its timed rounds
    (NVML, read between blocks)."""

    energy_per_call_j: float = column(
        "GPU energy per call, median over the row's energy windows (NVML total-energy counter, calls back to back "
        "after the timing, each window from one counter step to another); empty where the windows could not "
        "resolve it (energy_source says why)",
        role="measured",
        unit="J",
        label="J/call",
    )
    average_power_w: float = column(
        "energy of an energy window / its wall time, median over the windows",
        role="measured",
        unit="W",
        label="power W",
    )
    flop_per_joule: float = column(
        "executed FLOPs of one call (hardware where counted, useful where the kernel skips masked blocks) / "
        "energy_per_call_j",
        role="derived",
        unit="FLOP/J",
        label="FLOP/J",
    )
    tokens_per_joule: float = column(
        "real (non-padding) query tokens of one call / energy_per_call_j",
        role="derived",
        unit="tokens/J",
        label="tokens/J",
    )
    sm_clock_median_mhz: float = column(
        "median SM clock read right after each timed block", role="measured", unit="MHz", label="SM MHz"
    )
    sm_clock_min_mhz: float = column(
        "lowest SM clock read right after a timed block", role="measured", unit="MHz", label="SM min MHz"
    )
    clock_event_reasons: str = column(
        "clock-event (throttle) reasons NVML reported after any of the row's blocks, comma-separated",
        role="measured",
        label="clock events",
    )
    throttled_rounds: str = column(
        "rounds (0-based, as in times_ms) after whose block a power or thermal cap held the clock: kept, flagged",
        role="measured",
        label="throttled rounds",
    )
    throttled_share: float = column(
        "share of the row's rounds flagged in throttled_rounds", role="derived", unit="ratio", label="throttled"
    )
    energy_source: str = column(
        "nvml <driver version> where read, else why empty (CPU device, no nvidia-ml-py, NVML's error, timed alone, "
        "energy windows off, a window too short or an average power above the power limit)",
        role="measured",
        label="energy from",
    )
    energy_window_s: float = column(
        "length of one energy window (median): the energy figures' time base",
        role="measured",
        unit="s",
        label="window s",
    )
    energy_windows: int = column("energy windows the row's energy is the median of", role="measured", label="windows")
    energy_uncertainty: float = column(
        "one NVML counter step (as seen before the windows) / the shortest window: how far one step can move the "
        "energy figures",
        role="derived",
        unit="ratio",
        label="± energy",
    )
    energy_spread: float = column(
        "(largest - smallest) / median energy per call over the row's windows",
        role="derived",
        unit="ratio",
        label="energy spread",
    )
    sm_clock_rounds_mhz: str = column(
        "SM clock read right after each timed block, comma-separated in round order (as times_ms): whether a slow "
        "round ran at a lower clock",
        role="measured",
        label="SM MHz per round",
    )
