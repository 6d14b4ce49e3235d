"""Process settings that change the numbers: applied, and recorded as applied."""

from __future__ import annotations

import ctypes.util

import pytest
import torch

from mhabench.measure import allocator


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_threads_are_set_and_recorded(restore_threads: None) -> None:
    applied = allocator.apply_process_settings("system", threads=1)
    assert torch.get_num_threads() == 1
    assert applied == {"allocator": "system", "allocator_applied": "system default", "threads": 1}


def test_steady_calls_mallopt_for_both_thresholds(monkeypatch: pytest.MonkeyPatch, restore_threads: None) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(allocator, "_mallopt", lambda param, value: calls.append((param, value)) or True)
    applied = allocator.apply_process_settings("steady", threads=None)
    assert sorted(calls) == sorted(
        [
            (allocator.M_MMAP_THRESHOLD, allocator.STEADY_THRESHOLD_BYTES),
            (allocator.M_TRIM_THRESHOLD, allocator.STEADY_THRESHOLD_BYTES),
        ]
    )
    assert applied["allocator_applied"] is True


def test_system_leaves_glibc_alone(monkeypatch: pytest.MonkeyPatch, restore_threads: None) -> None:
    monkeypatch.setattr(allocator, "_mallopt", lambda param, value: pytest.fail("mallopt must not be called"))
    assert allocator.apply_process_settings("system", threads=None)["allocator_applied"] == "system default"


@pytest.mark.skipif(ctypes.util.find_library("c") is None, reason="no C library to load")
def test_real_mallopt_accepts_the_thresholds() -> None:
    assert allocator._mallopt(allocator.M_TRIM_THRESHOLD, allocator.STEADY_THRESHOLD_BYTES)
