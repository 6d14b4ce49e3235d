"""A CPU roof probed on this machine is kept for an hour and reused, and a run that reuses it says so."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from mhabench.measure.peaks import DevicePeaks, RoofSource
from mhabench.results.store import load_run
from mhabench.run import roof_record, runner
from mhabench.scenario.loading import parse_config

NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
PROBE = DevicePeaks(0.16, 9.5, "measured")


def test_a_probe_is_reused_within_the_hour_with_its_age_and_not_after() -> None:
    stamped = roof_record.kept("abc", "float32", PROBE, NOW)
    assert stamped.probed_at == NOW.isoformat() and stamped.reused_age_s is None
    later = roof_record.recent_roof("abc", "float32", NOW + dt.timedelta(minutes=20))
    assert later is not None
    assert (later.peak_tflops, later.peak_gbps, later.roof_source) == (0.16, 9.5, RoofSource.PROBED)
    assert later.reused_age_s == 1200.0 and later.probed_at == NOW.isoformat()
    assert later.source == "measured; reused from a probe 1200 s before this run"
    age = dt.timedelta(seconds=roof_record.REUSE_MAX_AGE_S + 1)
    assert roof_record.recent_roof("abc", "float32", NOW + age) is None
    assert roof_record.recent_roof("abc", "float32", NOW - dt.timedelta(seconds=1)) is None  # a clock that went back


def test_a_probe_is_only_reused_on_its_host_fingerprint_and_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    roof_record.kept("abc", "float32", PROBE, NOW)
    soon = NOW + dt.timedelta(seconds=5)
    assert roof_record.recent_roof("other", "float32", soon) is None
    assert roof_record.recent_roof("abc", "bfloat16", soon) is None
    monkeypatch.setattr(roof_record.platform, "node", lambda: "another-host")
    assert roof_record.recent_roof("abc", "float32", soon) is None


def test_a_damaged_record_or_a_corrected_roof_is_not_reused() -> None:
    path = roof_record.record_path("abc", "float32")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    assert roof_record.recent_roof("abc", "float32", NOW) is None
    raised = DevicePeaks(0.2, 10.0, "measured; raised to row", roof_source=RoofSource.RAISED)
    roof_record.kept("abc", "float32", raised, NOW)
    assert roof_record.recent_roof("abc", "float32", NOW) is None


def test_the_second_run_on_a_machine_reuses_the_first_runs_probe_and_records_it(
    tiny_config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes: list[str] = []
    monkeypatch.setattr(runner, "device_peaks", lambda device, dtype: probes.append(str(dtype)) or PROBE)
    config = parse_config({**tiny_config_data, "implementations": ["naive"]}, "tiny.yaml")
    first = runner.run(config, tmp_path)
    second = runner.run(config, tmp_path)
    assert probes == ["torch.float32"], "probed by the first run only"
    own, reused = first.manifest.roofline["float32"], second.manifest.roofline["float32"]
    assert own["reused_age_s"] is None and own["source"] == "measured"
    assert reused["probed_at"] == own["probed_at"] and reused["reused_age_s"] >= 0
    assert (reused["peak_tflops"], reused["peak_gbps"]) == (own["peak_tflops"], own["peak_gbps"])
    sources = set(load_run(second.run_dir).frame["roofline_source"])
    assert len(sources) == 1 and sources.pop().startswith("measured; reused from a probe")
