"""``make gpu-check``'s checks of the hardware counters and NVML, each against an answer known in advance.

- a copy kernel over S bytes reads S and writes S: its DRAM bytes are within 5 % of 2·S (an elementwise
  ``torch.add(x, 0, out=y)``: ``y.copy_(x)`` of a contiguous tensor is a ``cudaMemcpy``, which ncu does not profile);
- an m×n×k bf16 GEMM executes 2·m·n·k tensor-core FLOPs (the counter counts 2 per FMA);
- the fused layer (non-causal, bf16) executes on the tensor cores exactly the model's useful FLOPs,
  8·b·n·d² + 4·b·n²·d, profiled through the runner's own path and its default range replay
  (:func:`mhabench.run.ncu_profile.profile_case`);
- bf16 8192³ matmuls back to back over an energy window of at least 5 s (:mod:`mhabench.measure.energy_window`)
  draw between half the power limit and the limit × 1.02: an H100 read 697 W of 700 W over 4.8 s, so a loop
  that reads less measured something else (211 W over 74 ms was a check that could not fail).

The verdicts are pure functions of the figures (unit-tested with made-up figures on the CPU); without ``ncu`` or
``nvidia-ml-py``, or without permission to read the counters, a check is a SKIP that says so. The copy and GEMM
are profiled in a child (``python -m mhabench.checks.counter_checks copy|gemm``) started under ``ncu``, with the
same marker kernel and profiler start/stop as the runner's child.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mhabench.measure import nsight
from mhabench.measure.energy_window import Window, WindowMeter
from mhabench.measure.nvml import RoundSampler, open_sampler
from mhabench.results.energy import POWER_LIMIT_MARGIN
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.results.schema import RowStatus
from mhabench.run.ncu_child import MARKER_CYCLES, ProfileJob
from mhabench.run.ncu_profile import Finished, ProcessRunner, profile_case, run_process
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
ENERGY_MATMUL_SIZE = 8192
ENERGY_WINDOW_S = 5.0
"""About 50 counter steps: the energy is within ~2 % (4.8 s of these matmuls read 697 W on a 700 W H100)."""
ENERGY_MIN_POWER_SHARE = 0.5
"""Dense bf16 matmuls hold an H100 or H200 near its power limit (655–730 W of 700 W measured); half is a bound a
real loop clears with room and a misread (too short a window, an idle GPU, the wrong device) does not."""
SKIPPED_REASONS = (nsight.PERMISSION_ERROR, "no ncu")
PROFILE_TIMEOUT_S = 300.0


# --- verdicts (no GPU) ----------------------------------------------------------------------------


def skip_or_fail(counters: HardwareCounters) -> Verdict | None:
    """SKIP where the counters are out of reach (no ncu, no permission), FAIL where ncu failed; None: go on."""
    source = counters.counters_source or ""
    if re.match(r"ncu(\s\d|,|$)", source):  # "ncu <version>[, notes]": a profile was read; anything else is a reason
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


def energy_verdict(window: Window | None, power_limit_w: float | None) -> Verdict:
    """A window of at least ``ENERGY_WINDOW_S`` whose average power lies between ``ENERGY_MIN_POWER_SHARE`` of
    the power limit and the limit × ``POWER_LIMIT_MARGIN``."""
    if window is None or power_limit_w is None:
        return False, {"power_limit_w": power_limit_w, "reason": "NVML gave no energy window or no power limit"}
    figures = {
        "energy_j": window.energy_j,
        "seconds": window.seconds,
        "calls": window.calls,
        "counter_step_s": window.step_s,
        "average_power_w": window.power_w,
        "power_limit_w": power_limit_w,
        "lower_bound_w": ENERGY_MIN_POWER_SHARE * power_limit_w,
    }
    long_enough = window.seconds >= ENERGY_WINDOW_S
    in_range = ENERGY_MIN_POWER_SHARE * power_limit_w <= window.power_w <= power_limit_w * POWER_LIMIT_MARGIN
    return long_enough and in_range, figures


# --- measuring (GPU) ------------------------------------------------------------------------------


def profile_probe(probe: str, ncu: Path | None, runner: ProcessRunner = run_process) -> HardwareCounters:
    """One call of ``probe`` (this module's child: copy or gemm) profiled under ncu, as a row's counters."""
    if ncu is None:
        return HardwareCounters(counters_source="no ncu")
    child = [sys.executable, "-m", "mhabench.checks.counter_checks", probe]
    done: Finished = runner(nsight.ncu_command(ncu, nsight.metrics_for("bfloat16"), True, child), PROFILE_TIMEOUT_S)
    if done.returncode != 0 and nsight.unknown_metric(done.stdout + done.stderr):
        command = nsight.ncu_command(ncu, nsight.metrics_for("bfloat16", optional=False), True, child)
        done = runner(command, PROFILE_TIMEOUT_S)
    if done.returncode != 0:
        return HardwareCounters(counters_source=nsight.failure_reason(done.stdout + "\n" + done.stderr))
    version = nsight.ncu_version(runner([str(ncu), "--version"], 30.0).stdout) or "?"
    try:
        (kernels,) = nsight.split_at_markers(nsight.parse_csv(done.stdout), 1)
    except (nsight.NcuOutputError, ValueError) as exc:
        return HardwareCounters(counters_source=f"ncu output not attributable: {exc}")
    return nsight.counters_of(kernels, "bfloat16", f"ncu {version}", None)


def copy_check(device: torch.device) -> Verdict:
    return copy_verdict(profile_probe("copy", nsight.find_ncu()), COPY_BYTES)


def gemm_check(device: torch.device) -> Verdict:
    m, n, k = GEMM_SHAPE
    return flops_verdict(profile_probe("gemm", nsight.find_ncu()), 2 * m * n * k, "expected_2mnk")


def fused_check(device: torch.device) -> Verdict:
    """The fused layer's tensor FLOPs against its cost model's useful FLOPs, through the runner's profiling."""
    from mhabench.impls import get_spec
    from mhabench.results.schema import CaseIdentity, ModelledCost, Outcome, ResultRow

    config = RunConfig.model_validate({"dtype": "bfloat16", "implementations": ["fused"], "scenarios": [FUSED_CASE]})
    (case,) = expand_cases(config, device)
    cost = get_spec("fused").cost
    assert cost is not None
    useful = ModelledCost.from_cost(cost(case.workload())).useful_flops
    row = ResultRow(CaseIdentity.of(case, impl="fused"), Outcome(RowStatus.OK, ""))
    job = ProfileJob(case, ("fused",), f"cuda:{device.index or 0}", "steady", None, replay=nsight.RANGE)
    profile = profile_case(job, [row], True, PROFILE_TIMEOUT_S, nsight.find_ncu())
    return flops_verdict(profile.counters["fused"], useful, "model_useful_flops")


def energy_check(device: torch.device) -> Verdict:
    """bf16 8192³ matmuls back to back over one energy window of ``ENERGY_WINDOW_S`` (started and ended on a
    counter step, as a row's windows are); SKIP without NVML."""
    with open_sampler(device) as sampler:
        if not isinstance(sampler, RoundSampler):
            return None, {"reason": sampler}
        size = ENERGY_MATMUL_SIZE
        a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16) for _ in range(2))

        def run_batch(calls: int) -> None:
            for _ in range(calls):
                torch.matmul(a, b)
            torch.cuda.synchronize(device)

        run_batch(20)  # cuBLAS picks its kernel and the clocks come up before the window
        window = WindowMeter(sampler.nvml, sampler.handle, run_batch).window(1, ENERGY_WINDOW_S)
        verdict, figures = energy_verdict(window, sampler.power_limit_w())
        return verdict, {**figures, "source": sampler.source}


# --- the profiled child ---------------------------------------------------------------------------


def _probe_call(probe: str, device: torch.device) -> Callable[[], object]:
    if probe == "copy":
        source = torch.empty(COPY_BYTES // 2, dtype=torch.bfloat16, device=device)
        target = torch.empty_like(source)
        return lambda: torch.add(source, 0, out=target)  # a kernel: copy_ would be a cudaMemcpy ncu cannot see
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
