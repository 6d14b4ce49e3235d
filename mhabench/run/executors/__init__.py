"""Where a run's cases are measured: this process, a Slurm job array (submitit) or Ray tasks.

``executor: local`` is today's single process (docs/distributed.md). The engines are optional extras; without
one, asking for it is one line naming the extra to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from mhabench.errors import InputError
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device

if TYPE_CHECKING:
    from mhabench.run.request import RunRequest
    from mhabench.run.runner import Progress, RunResult

EXTRAS = {"slurm": ("submitit", "slurm"), "ray": ("ray", "ray")}
"""Executor → (the package it needs, the mhabench extra that installs it)."""


def is_remote(config: RunConfig) -> bool:
    """Whether the cases run on an engine's workers rather than in this process."""
    return config.executor.kind != "local"


def require(kind: str) -> None:
    """A one-line refusal, naming the extra, when the engine's package is not installed."""
    package, extra = EXTRAS[kind]
    if importlib.util.find_spec(package) is None:
        raise InputError(
            f"--executor {kind}: needs the {package} package, which is not installed; "
            f"pip install 'mhabench[{extra}]' (or mhabench[cluster] for both engines)"
        )


def planning_device(config: RunConfig) -> torch.device:
    """The device the config's cases are expanded for on this machine: a cluster run's is its workers' (``cpu`` or
    ``cuda``, recorded when it started), which the driver need not have."""
    remote = is_remote(config) and config.device != "auto"
    return torch.device(config.device) if remote else resolve_device(config.device)


def run_with_executor(
    config: RunConfig, out_root: Path, progress: Progress | None, request: RunRequest, under_torchrun: bool = False
) -> RunResult:
    """Run ``config`` through its executor's engine (:func:`mhabench.run.executors.driver.run_on_engine`)."""
    from mhabench.run.executors.driver import run_on_engine

    kind = config.executor.kind
    require(kind)
    if under_torchrun:
        raise InputError(f"--executor {kind}: the engine starts the workers; run mhabench itself, not under torchrun")
    if request.select is not None:
        raise InputError(f"--shard: executor {kind} schedules the whole sweep itself; drop --shard")
    if kind == "slurm":
        from mhabench.run.executors.slurm_jobs import SlurmEngine

        return run_on_engine(config, out_root, progress, request, SlurmEngine(config.executor.slurm))
    from mhabench.run.executors.ray_tasks import RayEngine

    return run_on_engine(config, out_root, progress, request, RayEngine(config.executor.ray))
