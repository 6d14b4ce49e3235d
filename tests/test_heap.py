"""The collector during a run: earlier objects set aside while it measures, given back after."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from mhabench.measure.peaks import DevicePeaks
from mhabench.run import runner
from mhabench.run.heap import earlier_objects_set_aside
from mhabench.scenario.loading import parse_config


def test_objects_made_before_the_block_are_frozen_inside_it_and_given_back_after() -> None:
    before = gc.get_freeze_count()
    with earlier_objects_set_aside():
        assert gc.get_freeze_count() > before
        frozen = gc.get_freeze_count()
        made_inside = [[] for _ in range(1000)]
        assert gc.get_freeze_count() == frozen  # what the block makes stays collectable
    assert gc.get_freeze_count() == before
    del made_inside


def test_an_exception_still_gives_the_objects_back() -> None:
    before = gc.get_freeze_count()
    with pytest.raises(RuntimeError), earlier_objects_set_aside():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == before


def test_a_run_measures_its_cases_with_the_earlier_objects_set_aside(
    tiny_config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed_peaks: DevicePeaks
) -> None:
    before = gc.get_freeze_count()
    seen: list[int] = []
    measure = runner.run_cases

    def recording(*args: Any, **kwargs: Any) -> None:
        seen.append(gc.get_freeze_count())
        measure(*args, **kwargs)

    monkeypatch.setattr(runner, "run_cases", recording)
    runner.run(parse_config({**tiny_config_data, "implementations": ["fused"]}, "tiny.yaml"), tmp_path)
    assert len(seen) == 1 and seen[0] > before
    assert gc.get_freeze_count() == before
