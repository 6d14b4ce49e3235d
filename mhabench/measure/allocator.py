"""The CPU allocator policy and thread count: process settings that change the numbers, applied once.

glibc returns large freed blocks to the OS (``mmap``/trim thresholds that adapt at run time), so
whether a call that allocates n×n scores page-faults depends on the allocator's history: the same
case measured twice in a process, or in two processes, can differ by 2×. ``allocator: steady``
(the default) fixes both thresholds high, so freed buffers are kept and reused as a long-running
server sees them; ``system`` leaves glibc's adaptive behaviour. Other allocators (jemalloc,
tcmalloc via ``LD_PRELOAD``) ignore ``mallopt``: the manifest records what was applied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any

import torch

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
STEADY_THRESHOLD_BYTES = 1 << 30
"""Blocks below 1 GiB come from the heap and stay there when freed (glibc caps mmap_threshold at 32 MiB by default)."""


def _mallopt(param: int, value: int) -> bool:
    path = ctypes.util.find_library("c")
    if path is None:
        return False
    try:
        return bool(ctypes.CDLL(path).mallopt(param, value))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False


def apply_process_settings(allocator: str, threads: int | None) -> dict[str, Any]:
    """Set the allocator policy and torch's thread count; return what was applied, for the manifest."""
    if threads is not None:
        torch.set_num_threads(threads)
    applied = allocator == "steady" and all(
        _mallopt(param, STEADY_THRESHOLD_BYTES) for param in (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD)
    )
    return {
        "allocator": allocator,
        "allocator_applied": applied if allocator == "steady" else "system default",
        "threads": torch.get_num_threads(),
    }
