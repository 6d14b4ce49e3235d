"""What a run ran on, for the manifest: versions, device, CPU, threads, git commit, GPU state.

On CUDA the manifest also records what changes a GPU's numbers without changing its name: driver,
clocks, power limit and MIG mode (from ``nvidia-smi``, when it is there and answers in time), which
SDPA backends are enabled, and whether fp32 matmuls may use TF32 (a 7× difference in the fp32 roof).
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import torch

from mhabench.measure.nvml import gpu_settings
from mhabench.measure.peaks import cpu_model, device_name
from mhabench.scenario.device import canonical_device
from mhabench.version import __version__

NVIDIA_SMI_TIMEOUT_S = 10
# nvidia-smi --query-gpu fields → manifest keys
NVIDIA_SMI_FIELDS = {
    "driver_version": "driver_version",
    "clocks.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.mem": "memory_clock_mhz",
    "power.limit": "power_limit_w",
    "mig.mode.current": "mig_mode",
    "pstate": "pstate",
}


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


def _smi_value(text: str) -> str | float | None:
    text = text.strip()
    if text in ("", "[N/A]", "N/A", "[Not Supported]"):
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _smi_rows(executable: str) -> list[list[str]]:
    fields = ["uuid", *NVIDIA_SMI_FIELDS]
    command = [executable, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:
        return []
    return [[part.strip() for part in line.split(",")] for line in done.stdout.strip().splitlines() if line.strip()]


def _row_for(rows: list[list[str]], device: torch.device) -> list[str] | None:
    """The nvidia-smi row of ``device``: by UUID (robust to CUDA_VISIBLE_DEVICES), else the only or N-th GPU."""
    uuid = str(getattr(torch.cuda.get_device_properties(device), "uuid", "")).lower()
    by_uuid = [row for row in rows if uuid and uuid in row[0].lower()]
    if by_uuid:
        return by_uuid[0]
    index = device.index or 0
    return rows[0] if len(rows) == 1 else rows[index] if index < len(rows) else None


def nvidia_smi(device: torch.device) -> dict[str, Any]:
    """Driver, clocks, power limit and MIG mode of ``device`` from nvidia-smi ({} when unavailable)."""
    executable = shutil.which("nvidia-smi")
    row = _row_for(_smi_rows(executable), device) if executable and device.type == "cuda" else None
    if row is None:
        return {}
    return {key: _smi_value(text) for key, text in zip(NVIDIA_SMI_FIELDS.values(), row[1:], strict=False)}


def math_settings() -> dict[str, Any]:
    """Backend switches that change what a kernel computes or how fast (recorded on every device)."""
    cuda = torch.backends.cuda
    sdpa = {
        "flash": cuda.flash_sdp_enabled(),
        "efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
        "cudnn": getattr(cuda, "cudnn_sdp_enabled", lambda: None)(),
    }
    return {
        "sdpa_enabled": sdpa,
        "allow_tf32": bool(cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def cuda_details(device: torch.device) -> dict[str, Any]:
    """Compute capability, SMs, memory and L2 of ``device``, plus what nvidia-smi says about it and, under
    ``nvml``, its power limit, application clocks and persistence mode (or why NVML could not say)."""
    props = torch.cuda.get_device_properties(device)
    return {
        "compute_capability": f"{props.major}.{props.minor}",
        "multiprocessors": props.multi_processor_count,
        "total_memory_bytes": props.total_memory,
        "l2_cache_bytes": getattr(props, "L2_cache_size", None),
        **nvidia_smi(device),
        "nvml": gpu_settings(device),
    }


OPTIONAL_PEER_PACKAGES = ("transformers", "flash-attn", "flash-attn-3", "xformers")
"""Distributions whose version changes what a peer row ran (the ``hf_*``, ``flash_attn`` and ``xformers`` rows)."""


def peer_packages() -> dict[str, str | None]:
    """The installed version of each optional peer package, None when absent; read from metadata, never imported."""
    versions: dict[str, str | None] = {}
    for package in OPTIONAL_PEER_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def environment(device: torch.device) -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {
        "mhabench_version": __version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "peer_packages": peer_packages(),
        "device": canonical_device(device),
        "device_kind": device.type,
        "device_name": device_name(device),
        "cpu_model": cpu_model(),
        "threads": torch.get_num_threads(),
        **math_settings(),
        **(cuda_details(device) if device.type == "cuda" else {}),
    }
