"""``mhabench calibrate --devices``' measurement: the calibration sweep once on each GPU of this machine.

Each is an ordinary run folder whose rows carry the device they ran on (``device_id``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from mhabench.errors import InputError
from mhabench.run import runner
from mhabench.run.request import RunRequest
from mhabench.scenario.config import RunConfig

RunOne = Callable[[RunConfig, Path, RunRequest], runner.RunResult]


def visible_devices() -> list[str]:
    """Every CUDA device this process sees, as ``cuda:N``; two at least, or one line saying how to measure more."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 2:
        raise InputError(
            f"calibrate --devices: needs two or more CUDA devices and this machine has {count}; on a cluster, run "
            "the calibration config on each node (docs/distributed.md) and pass the runs with --from"
        )
    return [f"cuda:{index}" for index in range(count)]


def measure_on_devices(
    config: RunConfig,
    devices: Sequence[str],
    out_root: Path,
    argv: Sequence[str],
    run_one: RunOne = lambda config, out, request: runner.run(config, out, None, request),
    report: Callable[[str], None] = lambda line: None,
) -> list[runner.RunResult]:
    """``config`` run on each of ``devices`` in turn, in this process: one run folder per device."""
    results = []
    for device in devices:
        result = run_one(config.model_copy(update={"device": device}), out_root, RunRequest(argv=tuple(argv)))
        report(f"{device}: {result.run_dir}")
        results.append(result)
    return results
