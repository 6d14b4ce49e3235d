"""``make gpu-check``'s checks of the hardware counters and NVML, each against an answer known in advance.

- a device copy of S bytes reads S and writes S: its DRAM bytes are within 5 % of 2·S;
- an m×n×k bf16 GEMM executes 2·m·n·k tensor-core FLOPs (the counter counts 2 per FMA);
- the fused layer (non-causal, bf16) executes on the tensor cores exactly the model's useful FLOPs,
  8·b·n·d² + 4·b·n²·d, profiled through the runner's own path (:func:`mhabench.run.hardware.profile_case`);
- a fixed matmul loop's energy, from NVML's counter, lies between 0 and the power limit × its time.

The verdicts are pure functions of the figures (unit-tested with made-up figures on the CPU); without ``ncu`` or
``nvidia-ml-py``, or without permission to read the counters, a check is a SKIP that says so. The copy and GEMM
are profiled in a child (``python -m mhabench.checks.hardware copy|gemm``) started under ``ncu``, with the
same marker kernel and profiler start/stop as the runner's child.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mhabench.measure import hardware
from mhabench.measure.nvml import RoundSampler, gpu_settings, open_sampler
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.run.hardware import Finished, ProcessRunner, profile_case, run_process
from mhabench.run.profiled_call import MARKER_CYCLES, ProfileJob
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.config import RunConfig

Verdict = tuple[bool | None, dict[str, Any]]
COPY_BYTES = 1 << 30
"""1 GiB: twenty times an H100's L2, so the copy cannot be served from it."""
COPY_TOLERANCE = 0.05
GEMM_SHAPE = (4096, 4096, 4096)
FLOP_TOLERANCE = 1e-3
"""The tensor counter was exact on the test machines; a thousandth allows for nothing but rounding."""
FUSED_CASE = {"batch": 1, "seq_len": 4096, "d_model": 4096, "heads": 32, "causal": False}
ENERGY_MATMUL = (8192, 50)
"""An 8192³ bf16 matmul, 50 times: about a second at full power on an H100."""
SKIPPED_REASONS = (hardware.PERMISSION_ERROR, "no ncu")
PROFILE_TIMEOUT_S = 300.0


# --- verdicts (no GPU) ----------------------------------------------------------------------------


def skip_or_fail(counters: HardwareCounters) -> Verdict | None:
    """SKIP where the counters are out of reach (no ncu, no permission), FAIL where ncu failed; None: go on."""
    source = counters.counters_source or ""
    if counters.kernels_profiled is not None:  # set only where a profile was read
        return None
    if any(reason in source for reason in SKIPPED_REASONS):
        return None, {"reason": source}
    return False, {"reason": source}


def copy_verdict(counters: HardwareCounters, copy_bytes: int) -> Verdict:
    """DRAM read + written within ``COPY_TOLERANCE`` of twice the copied bytes."""
    stop = skip_or_fail(counters)
    if stop is not None:
        return stop
    dram = (counters.dram_read_bytes or 0) + (counters.dram_write_bytes or 0)
    ratio = dram / (2 * copy_bytes)
    figures = {"copy_bytes": copy_bytes, "dram_bytes": dram, "dram_over_2x": ratio, "source": counters.counters_source}
    return abs(ratio - 1) <= COPY_TOLERANCE, figures


def flops_verdict(counters: HardwareCounters, expected_flops: float, what: str) -> Verdict:
    """Tensor-core FLOPs equal to ``expected_flops`` within ``FLOP_TOLERANCE``."""
    stop = skip_or_fail(counters)
    if stop is not None:
        return stop
    measured = counters.tensor_flops
    figures = {
        what: expected_flops,
        "tensor_flops": measured,
        "fp32_flops": counters.fp32_flops,
        "source": counters.counters_source,
    }
    if measured is None:
        return False, {**figures, "reason": "ncu gave no tensor-core counter for bf16"}
    figures["ratio"] = measured / expected_flops
    return abs(measured / expected_flops - 1) <= FLOP_TOLERANCE, figures


def energy_verdict(energy_j: float | None, seconds: float, power_limit_w: float | None) -> Verdict:
    """More than 0 J, and no more than the power limit could deliver in the loop's time."""
    figures = {"energy_j": energy_j, "seconds": seconds, "power_limit_w": power_limit_w}
    if energy_j is None or power_limit_w is None:
        return False, {**figures, "reason": "NVML gave no energy or no power limit"}
    figures["average_power_w"] = energy_j / seconds
    return 0 < energy_j <= power_limit_w * seconds, figures


# --- measuring (GPU) ------------------------------------------------------------------------------


def profile_probe(probe: str, ncu: Path | None, runner: ProcessRunner = run_process) -> HardwareCounters:
    """One call of ``probe`` (this module's child: copy or gemm) profiled under ncu, as a row's counters."""
    if ncu is None:
        return HardwareCounters(counters_source="no ncu")
    child = [sys.executable, "-m", "mhabench.checks.hardware", probe]
    done: Finished = runner(hardware.ncu_command(ncu, hardware.metrics_for("bfloat16"), True, child), PROFILE_TIMEOUT_S)
    if done.returncode != 0 and hardware.unknown_metric(done.stdout + done.stderr):
        command = hardware.ncu_command(ncu, hardware.metrics_for("bfloat16", optional=False), True, child)
        done = runner(command, PROFILE_TIMEOUT_S)
    if done.returncode != 0:
        return HardwareCounters(counters_source=hardware.failure_reason(done.stdout + "\n" + done.stderr))
    version = hardware.ncu_version(runner([str(ncu), "--version"], 30.0).stdout) or "?"
    try:
        (kernels,) = hardware.split_at_markers(hardware.parse_csv(done.stdout), 1)
    except (hardware.NcuOutputError, ValueError) as exc:
        return HardwareCounters(counters_source=f"ncu output not attributable: {exc}")
    return hardware.counters_of(kernels, "bfloat16", f"ncu {version}", None)


def copy_check(device: torch.device) -> Verdict:
    return copy_verdict(profile_probe("copy", hardware.find_ncu()), COPY_BYTES)


def gemm_check(device: torch.device) -> Verdict:
    m, n, k = GEMM_SHAPE
    return flops_verdict(profile_probe("gemm", hardware.find_ncu()), 2 * m * n * k, "expected_2mnk")


def fused_check(device: torch.device) -> Verdict:
    """The fused layer's tensor FLOPs against its cost model's useful FLOPs, through the runner's profiling."""
    from mhabench.impls import get_spec
    from mhabench.results.schema import CaseIdentity, ModelledCost, Outcome, ResultRow
    from mhabench.run.steps import workload

    config = RunConfig.model_validate({"dtype": "bfloat16", "implementations": ["fused"], "scenarios": [FUSED_CASE]})
    (case,) = expand_cases(config, device)
    cost = get_spec("fused").cost
    assert cost is not None
    useful = ModelledCost.from_cost(cost(workload(case))).useful_flops
    row = ResultRow(CaseIdentity(impl="fused", dtype="bfloat16", case_id=case.case_id), Outcome("ok", ""))
    job = ProfileJob(case, ("fused",), f"cuda:{device.index or 0}", "steady", None)
    profile = profile_case(job, [row], True, PROFILE_TIMEOUT_S, hardware.find_ncu())
    return flops_verdict(profile.counters["fused"], useful, "model_useful_flops")


def energy_check(device: torch.device) -> Verdict:
    """A fixed matmul loop between two NVML reads, synchronised; SKIP without NVML. No lead runs, so no lead's
    energy is taken off (the sampler has no lead reading for the loop)."""
    with open_sampler(device) as sampler:
        if not isinstance(sampler, RoundSampler):
            return None, {"reason": sampler}
        size, calls = ENERGY_MATMUL
        a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16) for _ in range(2))
        torch.cuda.synchronize(device)
        mark = sampler.before()
        for _ in range(calls):
            torch.matmul(a, b)
        torch.cuda.synchronize(device)
        sampler.after("loop", mark, calls)
        energy = sampler.energy("loop")
        reading = sampler.readings["loop"][0]
    verdict, figures = energy_verdict(reading.energy_j, reading.seconds, gpu_settings(device).get("power_limit_w"))
    return verdict, {**figures, "sm_clock_mhz": energy.sm_clock_median_mhz, "reasons": energy.clock_event_reasons}


# --- the profiled child ---------------------------------------------------------------------------


def _probe_call(probe: str, device: torch.device) -> Callable[[], object]:
    if probe == "copy":
        source = torch.empty(COPY_BYTES // 2, dtype=torch.bfloat16, device=device)
        target = torch.empty_like(source)
        return lambda: target.copy_(source)
    m, n, k = GEMM_SHAPE
    left = torch.randn(m, k, dtype=torch.bfloat16, device=device)
    right = torch.randn(k, n, dtype=torch.bfloat16, device=device)
    return lambda: left @ right


def main(argv: list[str]) -> int:
    """``copy`` or ``gemm``: warm up, then a marker and one call between the profiler's start and stop."""
    device = torch.device("cuda", torch.cuda.current_device())
    call = _probe_call(argv[0], device)
    call()
    torch.cuda.synchronize(device)
    torch.cuda.profiler.start()
    torch.cuda._sleep(MARKER_CYCLES)
    call()
    torch.cuda.synchronize(device)
    torch.cuda.profiler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
