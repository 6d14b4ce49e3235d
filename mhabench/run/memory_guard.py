"""Refuse a case that cannot fit in the memory available, before trying it.

Trying is the expensive way to find out: a case that does not fit takes a minute and gigabytes of
swap before it fails, or brings in the OOM killer, which takes the whole run with it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import torch

from mhabench.impls.reference import reference_bytes
from mhabench.impls.registry import ImplSpec
from mhabench.scenario.cases import Case

MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")
# (limit, usage, the memory.stat key of reclaimable page cache) for cgroup v2, then v1
_CGROUP_FILES = (
    ("memory.max", "memory.current", "inactive_file"),
    ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "total_inactive_file"),
)
SAFETY = 0.9
"""Share of the available memory a case may plan to use: the allocator, the interpreter and
fragmentation need the rest."""


def available_bytes(device: torch.device) -> int:
    """Memory a new allocation on ``device`` can still get.

    CUDA: the driver's free memory plus what torch's caching allocator holds but does not use (it
    hands those blocks out before asking the driver). CPU: ``MemAvailable`` (free memory plus page
    cache the kernel can drop), falling back to ``sysconf`` where ``/proc`` does not exist, and never
    more than the container's cgroup limit leaves (a container sees the host's ``/proc/meminfo``).
    Raises ``OSError`` when the platform says nothing, so the caller can decide not to guard.
    """
    if device.type == "cuda":
        free_bytes, _total = torch.cuda.mem_get_info(device)
        return free_bytes + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    host_bytes = _meminfo_available() or _sysconf_available()
    cgroup_bytes = _cgroup_available()
    return host_bytes if cgroup_bytes is None else min(host_bytes, cgroup_bytes)


def available_now() -> Callable[[torch.device], int]:
    """:func:`available_bytes` as of one moment: each device read once, however many checks ask (a case's
    implementations are screened one after the other before anything is built, so nothing changes between them). A
    device that could not be read is read again when asked again."""
    read: dict[torch.device, int] = {}

    def available(device: torch.device) -> int:
        if device not in read:
            read[device] = available_bytes(device)
        return read[device]

    return available


def _meminfo_available() -> int | None:
    try:
        lines = MEMINFO.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024  # the kernel reports kB
    return None


def _cgroup_available() -> int | None:
    """The cgroup's limit minus its working set (usage less reclaimable page cache); None without a limit."""
    for limit_name, usage_name, cache_key in _CGROUP_FILES:
        try:
            limit_text = (CGROUP / limit_name).read_text(encoding="ascii").strip()
            usage_bytes = int((CGROUP / usage_name).read_text(encoding="ascii"))
            stat_lines = (CGROUP / limit_name).with_name("memory.stat").read_text(encoding="ascii").splitlines()
        except (OSError, ValueError):
            continue
        if not limit_text.isdigit() or int(limit_text) >= 2**62:  # "max", or v1's "no limit" near 2^63
            return None
        cache_bytes = next((int(line.split()[1]) for line in stat_lines if line.split()[:1] == [cache_key]), 0)
        return max(0, int(limit_text) - usage_bytes + cache_bytes)
    return None


def _sysconf_available() -> int:
    """Free physical pages (Linux without /proc, BSD); else total pages (macOS): an upper bound."""
    for pages_name in ("SC_AVPHYS_PAGES", "SC_PHYS_PAGES"):
        try:
            return os.sysconf(pages_name) * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            continue
    raise OSError("cannot tell how much memory is available on this platform")


def format_bytes(n_bytes: float) -> str:
    """Decimal units, one decimal: ``57.6 GB`` (what the OS and GPU datasheets print)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n_bytes) < 1000 or unit == "TB":
            return f"{n_bytes:.1f} {unit}" if unit != "B" else f"{int(n_bytes)} B"
        n_bytes /= 1000
    raise AssertionError("unreachable")


def fits(
    predicted_bytes: int,
    reference_bytes: int,
    device: torch.device,
    safety: float = SAFETY,
    reference_device: torch.device | None = None,
    available: Callable[[torch.device], int] | None = None,
) -> str | None:
    """None when the case fits, else why not: ``predicted 57.6 GB > available 21.9 GB``.

    The float64 reference is computed before the implementations and on its own device (the CPU
    unless ``reference_device`` says otherwise), so it is checked first and on its own: a case whose
    reference cannot fit is the reference's failure, not the implementation's. Availability that
    cannot be read means no guard (``None``): refusing every case would be worse than the old
    behaviour of trying. ``available`` reads what a device has (:func:`available_bytes` when None).
    """
    checks = [("float64 reference needs", reference_bytes, reference_device or torch.device("cpu"))]
    checks.append(("predicted", predicted_bytes, device))
    for label, need_bytes, where in checks:
        try:
            have_bytes = (available or available_bytes)(where)
        except OSError:
            return None
        if need_bytes > have_bytes * safety:
            limit = "available" if need_bytes > have_bytes else f"{safety:.0%} of available"
            return f"{label} {format_bytes(need_bytes)} > {limit} {format_bytes(have_bytes)}"
    return None


def case_too_big(
    spec: ImplSpec, case: Case, device: torch.device, available: Callable[[torch.device], int] | None = None
) -> str | None:
    """Why ``spec`` on ``case`` would not fit (its predicted peak, or the float64 reference's), or None; ``available``
    as :func:`fits` takes it."""
    shape = case.workload()
    predicted = spec.cost(shape).predicted_peak_bytes if spec.cost else 0
    checked = dataclasses.replace(shape, kv_len=case.seq_len + 1) if shape.decode else shape  # all the cache
    return fits(predicted, reference_bytes(checked), device, reference_device=device, available=available)
