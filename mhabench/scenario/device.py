"""Which device and dtype a scenario runs on: ``auto`` resolved, one spelling per physical device."""

from __future__ import annotations

import torch

from mhabench.errors import DeviceUnavailableError


def canonical_device(device: str | torch.device) -> str:
    """One spelling per physical device: ``auto``, ``cuda`` and ``cuda:0`` on GPU 0 all give "cuda:0".

    ``auto`` is CUDA when available; a CUDA device without an index is the current device. So
    ``compare`` matches runs made with ``auto`` and with ``--device cuda:0``.
    """
    if str(device) == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type != "cuda":
        return device.type
    index = device.index
    if index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
    return f"cuda:{index}"


def auto_dtype(device: torch.device) -> str:
    """``dtype: auto``: float32 on the CPU; bfloat16 on Ampere (8.0) and later GPUs; float16 before.

    Pre-Ampere GPUs have no bf16 tensor cores: torch emulates bf16 there, far below the fp16 rate.
    """
    if device.type != "cuda":
        return "float32"
    major, _ = torch.cuda.get_device_capability(device)
    return "bfloat16" if major >= 8 else "float16"


def resolve_device(requested: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; CUDA on a machine without it is an input error."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device: {requested!r} requested but CUDA is not available on this machine (use device: cpu or auto)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceUnavailableError(
                f"device: {requested!r} requested but only {torch.cuda.device_count()} GPU(s) exist"
            )
    return device


def resolve_dtype(requested: str, device: torch.device) -> str:
    """``auto`` → :func:`auto_dtype` (float32 on the CPU, bf16 from Ampere, fp16 before)."""
    return auto_dtype(device) if requested == "auto" else requested
