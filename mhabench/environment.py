"""What a run ran on, for the manifest: versions, device, CPU, threads, git commit."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

import torch

import mhabench
from mhabench.measure.hardware import cpu_model, device_name


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD of the repository the current folder is in (None outside a repo or without git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def environment(device: torch.device) -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {
        "mhabench_version": mhabench.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "device": str(device),
        "device_kind": device.type,
        "device_name": device_name(device),
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
    }
