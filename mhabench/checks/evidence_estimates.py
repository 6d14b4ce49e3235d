"""What each step of ``make gpu-evidence`` should take on an H100, computed from the recorded H100 files.

``shared/runs`` holds what the GPU machines have run: the default sweep's rows and per-call times
(``20261126T070612Z-default-gpu``), the same sweep's command timed from the shell (``h100-20261127/default-sweep.log``
beside its manifest), ``make gpu-check``'s per-check seconds (``h100-20261127/gpu_check.log``), the default sweep
under kernel-replay counters (``20261127T074353Z-default-gpu-counters-partial``: 4 cases, 1,174 kernels), and
NVML windows over back-to-back matmuls (``h100-20261127/nvml-energy-windows.txt``). Each step's estimate is
priced from those files here, with the basis it rests on, never typed in. The GPU machines get the tree without
``shared/``, so the estimates travel as package data (``evidence_estimates.json``, written by
``python -m mhabench.checks.evidence_estimates --write``; a test keeps it equal to what the recordings give).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import re
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import torch
import yaml

from mhabench.checks import counter_checks
from mhabench.checks.sweep_estimate import (
    CommandTiming,
    command_estimate,
    command_timing,
    manifest,
    replayed_rows,
    rows_estimate_s,
    span_s,
)
from mhabench.results.energy import COUNTER_STEP_S
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.config import GPU_DEFAULT_CONFIG_NAME, EnergyConfig, RunConfig
from mhabench.scenario.loading import default_config_text, load_config, parse_config

PACKAGED = "evidence_estimates.json"
DEFAULT_RUN = "20261126T070612Z-default-gpu"
COUNTERS_RUN = "20261127T074353Z-default-gpu-counters-partial"
CHECK_LOG = "h100-20261127/gpu_check.log"
SWEEP_LOG = "h100-20261127/default-sweep.log"
SWEEP_MANIFEST = "h100-20261127/default-sweep-manifest.json"
NVML_WINDOWS = "h100-20261127/nvml-energy-windows.txt"
ENERGY_WINDOWS = 3
"""Energy windows per ok row in the energy step: three give the spread between windows (``energy_spread``)."""
CHECK_LINE = re.compile(r"^(PASS|FAIL|SKIP) (\S+?): .*\[([\d.]+) s\]$", re.MULTILINE)
NVML_LINE = re.compile(r"n=(\d+) s=([\d.]+)")
CUDA = "cuda"


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Seconds a step should take, and what that figure rests on (the recorded files and how they were read)."""

    seconds: float
    basis: str


def gpu_default() -> RunConfig:
    """The GPU default exactly as ``mhabench run`` loads it on a CUDA machine (the embedded package data)."""
    return parse_config(yaml.safe_load(default_config_text(GPU_DEFAULT_CONFIG_NAME)), GPU_DEFAULT_CONFIG_NAME)


def check_seconds(log: Path) -> dict[str, float]:
    """Seconds of each check in a ``make gpu-check`` log (its "STATUS name: … [N s]" lines)."""
    return {name: float(seconds) for _, name, seconds in CHECK_LINE.findall(log.read_text(encoding="utf-8"))}


def matmul_s(nvml_windows: Path) -> float:
    """Seconds of one 8192³ bf16 matmul: the longest recorded window over its number of matmuls."""
    calls, seconds = max((int(n), float(s)) for n, s in NVML_LINE.findall(nvml_windows.read_text(encoding="utf-8")))
    return seconds / calls


def rows_of(config: RunConfig, impls: list[str] | None = None) -> list[tuple[str, str]]:
    """(case_id, implementation) of every row a config runs on CUDA."""
    names = impls or config.implementations
    return [(case.case_id, impl) for case in expand_cases(config, _cuda()) for impl in names]


@dataclasses.dataclass
class Recordings:
    """The recorded files, read once."""

    runs: Path
    configs: Path

    @functools.cached_property
    def rows(self) -> pd.DataFrame:
        return replayed_rows(self.runs / DEFAULT_RUN, gpu_default().timing)

    @functools.cached_property
    def sweep(self) -> CommandTiming:
        return command_timing(self.runs / SWEEP_LOG, self.runs / SWEEP_MANIFEST)

    @functools.cached_property
    def checks(self) -> dict[str, float]:
        return check_seconds(self.runs / CHECK_LOG)

    def config(self, name: str) -> RunConfig:
        return load_config(self.configs / f"gpu-evidence-{name}.yaml")


def checks_estimate(rec: Recordings, sweep: CommandTiming) -> Estimate:
    """Start-up, then energy (its window, the warm-up matmuls and a counter step at each end), dram_copy and
    fused_hardware_flops as recorded, and fp8_attention priced as the recorded reference_cost (one reference at
    n = 8192 per pattern, two patterns) and fused_throughput (fused timed at n 4k–16k)."""
    seconds = rec.checks
    energy_s = counter_checks.ENERGY_WINDOW_S + 20 * matmul_s(rec.runs / NVML_WINDOWS) + 2 * COUNTER_STEP_S
    fp8_s = 2 * seconds["reference_cost"] + seconds["fused_throughput"]
    total = sweep.startup_s + energy_s + seconds["dram_copy"] + seconds["fused_hardware_flops"] + fp8_s
    basis = (
        f"start-up {sweep.startup_s:.1f} s ({SWEEP_LOG}); energy {energy_s:.1f} s (window + warm-up, {NVML_WINDOWS}); "
        f"dram_copy {seconds['dram_copy']:.1f} s and fused_hardware_flops {seconds['fused_hardware_flops']:.1f} s "
        f"({CHECK_LOG}); fp8_attention {fp8_s:.1f} s (2 × reference_cost + fused_throughput, {CHECK_LOG}: not run yet)"
    )
    return Estimate(total, basis)


def kernel_replay_s_per_kernel(rec: Recordings, child_s: float) -> float:
    """Seconds of kernel replay per kernel: the counters run's span, less its rows' plain time and one ncu child
    per case, over the kernels it profiled."""
    run = rec.runs / COUNTERS_RUN
    profiled = pd.read_csv(run / "results.csv", keep_default_na=False)
    keys = list(zip(profiled["case_id"], profiled["impl"], strict=True))
    kernels = len(pd.read_csv(run / "kernels.csv"))
    plain_s = rows_estimate_s(rec.rows, keys)
    return (span_s(manifest(run)) - plain_s - profiled["case_id"].nunique() * child_s) / kernels


def fp8_estimate(rec: Recordings, sweep: CommandTiming) -> Estimate:
    """fused's recorded row time at n 4k and 16k (same batch and mask), its geometric mean standing for n = 8k,
    counted twice (fused_fp8 priced as fused), corrected as the default sweep's estimate is."""
    rows = rec.rows.query("impl == 'fused' and d_model == 4096")
    row_s = rows.assign(row_s=rows["replayed_s"] + rows["overhead_s"]).set_index(["batch", "causal", "seq_len"])
    cases = {(c.batch, c.causal) for c in expand_cases(rec.config("fp8"), _cuda())}
    per_case = [(row_s.loc[(b, c, 4096), "row_s"] * row_s.loc[(b, c, 16384), "row_s"]) ** 0.5 for b, c in cases]
    scale = sweep.wall_s / (sweep.startup_s + rows_estimate_s(rec.rows))
    total = scale * (sweep.startup_s + 2 * sum(per_case))
    basis = f"fused's recorded rows at n 4k and 16k ({DEFAULT_RUN}), geometric mean for 8k, fused_fp8 priced as fused"
    return Estimate(total, basis)


def _cuda() -> torch.device:
    return torch.device(CUDA)


def recorded_estimates(runs: Path, configs: Path) -> dict[str, Estimate]:
    """Every step kind's estimate, from the recorded files in ``runs`` and the evidence configs in ``configs``."""
    rec = Recordings(runs, configs)
    sweep, rows, seconds = rec.sweep, rec.rows, rec.checks
    child_s = seconds["fused_hardware_flops"]
    subset, kernel = rows_of(rec.config("subset")), rows_of(rec.config("kernel-replay"))
    subset_s = command_estimate(rows, sweep, subset)
    per_kernel_s = kernel_replay_s_per_kernel(rec, child_s)
    kernels = rows.set_index(["case_id", "impl"])["kernels_per_call"].astype(int)
    kernel_s = command_estimate(rows, sweep, kernel) + child_s + per_kernel_s * sum(kernels[key] for key in kernel)
    subset_cases = len({case for case, _ in subset})
    window_s = EnergyConfig().window_s + 2 * COUNTER_STEP_S
    default_rows = rows_of(gpu_default())
    return {
        "checks": checks_estimate(rec, sweep),
        "sweep": Estimate(
            command_estimate(rows, sweep, default_rows),
            f"{DEFAULT_RUN}'s per-call times replayed under the shipped timing, corrected by the 24-case command's "
            f"{sweep.wall_s:.1f} s ({SWEEP_LOG})",
        ),
        "subset": Estimate(subset_s, f"the subset's rows of {DEFAULT_RUN}, priced as the sweep's"),
        "counters_range": Estimate(
            subset_s + subset_cases * child_s,
            f"the plain subset + one ncu child per case at fused_hardware_flops' {child_s:.1f} s ({CHECK_LOG})",
        ),
        "counters_kernel": Estimate(
            kernel_s,
            f"its rows plain + one ncu child + {per_kernel_s:.2f} s per kernel replayed ({COUNTERS_RUN}: span less "
            "its rows' plain time and children, over kernels.csv)",
        ),
        "energy": Estimate(
            subset_s + len(subset) * ENERGY_WINDOWS * window_s,
            f"the plain subset + {ENERGY_WINDOWS} windows per row of {EnergyConfig().window_s:g} s and a "
            f"{COUNTER_STEP_S:g} s counter step at each end",
        ),
        "fp8": fp8_estimate(rec, sweep),
        "spread": Estimate(
            3 * sweep.startup_s, f"three analysis commands, each a start-up of {sweep.startup_s:.1f} s ({SWEEP_LOG})"
        ),
    }


def as_json(estimates: dict[str, Estimate]) -> str:
    return json.dumps({kind: dataclasses.asdict(e) for kind, e in estimates.items()}, indent=2, sort_keys=True) + "\n"


def packaged_estimates() -> dict[str, Estimate]:
    """The estimates shipped with the package (the GPU machines have no ``shared/runs``)."""
    text = resources.files("mhabench.checks").joinpath(PACKAGED).read_text(encoding="utf-8")
    return {kind: Estimate(**fields) for kind, fields in json.loads(text).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mhabench.checks.evidence_estimates", description=__doc__.split("\n")[0]
    )
    parser.add_argument("runs", type=Path, help="the recorded runs folder (shared/runs)")
    parser.add_argument("--configs", type=Path, default=Path("configs"))
    parser.add_argument("--write", action="store_true", help=f"write mhabench/checks/{PACKAGED}")
    args = parser.parse_args(argv)
    text = as_json(recorded_estimates(args.runs, args.configs))
    if args.write:
        Path(__file__).with_name(PACKAGED).write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
