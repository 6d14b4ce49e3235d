"""Refusing work that cannot fit: memory availability and the fits() verdict."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from mhabench.run import memory_guard as guard

CPU = torch.device("cpu")
CUDA = torch.device("cuda")
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


@pytest.fixture
def available(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Bytes available per device type, as ``fits`` will see them."""
    by_type = {"cpu": 21_900_000_000, "cuda": 80_000_000_000}
    monkeypatch.setattr(guard, "available_bytes", lambda device: by_type[device.type])
    return by_type


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [(0, "0 B"), (999, "999 B"), (1500, "1.5 kB"), (57_600_000_000, "57.6 GB"), (3.2e15, "3200.0 TB")],
)
def test_format_bytes_uses_decimal_units(n_bytes: float, text: str) -> None:
    assert guard.format_bytes(n_bytes) == text


def test_case_above_available_names_both_figures(available: dict[str, int]) -> None:
    assert guard.fits(57_600_000_000, 1_000_000, CPU) == "predicted 57.6 GB > available 21.9 GB"


def test_reference_that_cannot_fit_is_named_as_the_reference(available: dict[str, int]) -> None:
    reason = guard.fits(1_000_000, 57_600_000_000, CPU)
    assert reason == "float64 reference needs 57.6 GB > available 21.9 GB"
    # both too big: the reference runs first, so it is the one named
    assert guard.fits(60_000_000_000, 57_600_000_000, CPU) == reason


def test_fitting_case_passes_and_safety_margin_is_said(available: dict[str, int]) -> None:
    assert guard.fits(19_000_000_000, 19_000_000_000, CPU) is None
    assert guard.fits(21_000_000_000, 0, CPU) == "predicted 21.0 GB > 90% of available 21.9 GB"
    assert guard.fits(21_000_000_000, 0, CPU, safety=1.0) is None


def test_reference_is_checked_on_its_own_device(available: dict[str, int]) -> None:
    """On a GPU run the reference needs host RAM, the implementation device memory."""
    assert guard.fits(50_000_000_000, 10_000_000_000, CUDA) is None
    assert guard.fits(50_000_000_000, 30_000_000_000, CUDA).startswith("float64 reference needs 30.0 GB")
    assert guard.fits(50_000_000_000, 30_000_000_000, CUDA, reference_device=CUDA) is None
    assert guard.fits(90_000_000_000, 0, CUDA) == "predicted 90.0 GB > available 80.0 GB"


def test_unknown_availability_means_no_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(device: torch.device) -> int:
        raise OSError("no idea")

    monkeypatch.setattr(guard, "available_bytes", unknown)
    assert guard.fits(10**15, 10**15, CPU) is None


def fake_system(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, meminfo: str | None, cgroup: dict[str, str]) -> None:
    tmp_path.mkdir(exist_ok=True)
    if meminfo is not None:
        (tmp_path / "meminfo").write_text(meminfo, encoding="ascii")
    for name, text in cgroup.items():
        (tmp_path / "cgroup" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cgroup" / name).write_text(text, encoding="ascii")
    monkeypatch.setattr(guard, "MEMINFO", tmp_path / "meminfo")
    monkeypatch.setattr(guard, "CGROUP", tmp_path / "cgroup")


MEMINFO = "MemTotal:       24684092 kB\nMemFree:  100 kB\nMemAvailable:   1000 kB\n"


def test_cpu_availability_reads_memavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_system(monkeypatch, tmp_path, MEMINFO, {})
    assert guard.available_bytes(CPU) == 1_024_000


def test_cgroup_v2_limit_caps_the_host_figure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cgroup = {"memory.max": "600000\n", "memory.current": "500000\n", "memory.stat": "anon 1\ninactive_file 100000\n"}
    fake_system(monkeypatch, tmp_path, MEMINFO, cgroup)
    assert guard.available_bytes(CPU) == 600_000 - 500_000 + 100_000


def test_cgroup_without_limit_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_system(monkeypatch, tmp_path, MEMINFO, {"memory.max": "max\n", "memory.current": "5\n", "memory.stat": ""})
    assert guard.available_bytes(CPU) == 1_024_000
    v1 = {
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
        "memory/memory.usage_in_bytes": "5\n",
        "memory/memory.stat": "total_inactive_file 0\n",
    }
    fake_system(monkeypatch, tmp_path / "v1", MEMINFO, v1)
    assert guard.available_bytes(CPU) == 1_024_000


def test_without_proc_falls_back_to_sysconf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_system(monkeypatch, tmp_path, None, {})
    monkeypatch.setattr(guard.os, "sysconf", {"SC_AVPHYS_PAGES": 3, "SC_PAGE_SIZE": 4096}.__getitem__)
    assert guard.available_bytes(CPU) == 3 * 4096


def test_cuda_availability_counts_the_caching_allocators_free_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (10_000, 80_000))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device: 5_000)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device: 3_000)
    assert guard.available_bytes(CUDA) == 12_000


def test_this_machine_agrees_with_its_own_meminfo() -> None:
    """On this machine the figure lies within its physical memory and, where the kernel reports one and no
    cgroup limit applies, within 5 % of the physical memory of ``MemAvailable`` read here independently (memory
    moves between the two reads, so not exactly). A unit slip (kB taken as bytes) fails both."""
    total_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    available = guard.available_bytes(CPU)
    assert 0 < available <= total_bytes
    meminfo = Path("/proc/meminfo")
    if not meminfo.is_file() or guard._cgroup_available() is not None:
        return
    kib = next(int(line.split()[1]) for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:"))
    assert abs(available - kib * 1024) < 0.05 * total_bytes


@pytest.mark.cuda
def test_cuda_availability_follows_a_real_allocation() -> None:
    """A 1 GiB tensor takes 1 GiB from the figure; freeing it gives it back (cached blocks count)."""
    gib = 1 << 30
    before = guard.available_bytes(CUDA)
    assert 0 < before <= torch.cuda.mem_get_info(CUDA)[1]
    block = torch.empty(gib, dtype=torch.uint8, device=CUDA)
    assert abs(before - guard.available_bytes(CUDA) - gib) < 64 << 20
    del block
    assert torch.cuda.memory_reserved(CUDA) >= gib  # still held by the caching allocator...
    assert abs(guard.available_bytes(CUDA) - before) < 64 << 20  # ...and still available to the next case
    total = torch.cuda.mem_get_info(CUDA)[1]
    assert guard.fits(2 * total, 0, CUDA).startswith(f"predicted {guard.format_bytes(2 * total)} > available ")


def test_memory_as_of_one_moment_is_read_once_per_device_and_again_after_a_failed_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    answers = iter([OSError("busy"), 5_000, 80_000])

    def counting(device: torch.device) -> int:
        reads.append(device.type)
        answer = next(answers)
        if isinstance(answer, OSError):
            raise answer
        return answer

    monkeypatch.setattr(guard, "available_bytes", counting)
    available = guard.available_now()
    with pytest.raises(OSError):
        available(CPU)
    assert [available(CPU), available(CPU), available(CUDA), available(CUDA)] == [5_000, 5_000, 80_000, 80_000]
    assert reads == ["cpu", "cpu", "cuda"]


def test_a_run_reads_the_memory_once_for_each_cases_screening(
    monkeypatch: pytest.MonkeyPatch, tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: object
) -> None:
    from mhabench.run import runner
    from mhabench.scenario.loading import parse_config

    reads: list[str] = []
    monkeypatch.setattr(guard, "available_bytes", lambda device: reads.append(device.type) or 10**12)
    scenario = {**tiny_config_data["scenarios"][0], "heads": [1, 2]}  # two cases of the four core implementations
    result = runner.run(parse_config({**tiny_config_data, "scenarios": [scenario]}, "tiny.yaml"), tmp_path)
    assert len(result.rows) == 8 and {row.status for row in result.rows} == {"ok"}
    assert reads == ["cpu", "cpu"]
