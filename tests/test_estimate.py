"""How long a run will take (``run --dry-run``, a replicated run's time left) and how long it took (the line a run
ends with): the timing rules on synthetic per-call times, an earlier run's latencies from a history store, the
wall-time split on synthetic manifests, and the slim replicate entry point."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.cli_replicate import read_roofline
from mhabench.history import store
from mhabench.history.points import RowRecord, RunRecord
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.manifest import Manifest
from mhabench.results.schema import ModelledCost
from mhabench.run import estimate as est
from mhabench.run import runner
from mhabench.run.replicates import Replicate, ReplicateProgress, child_command
from mhabench.scenario.config import TimingConfig
from mhabench.scenario.loading import parse_config
from mhabench.views import run_time
from mhabench.views.progress import replicate_line

TIMING = TimingConfig(min_run_time_s=0.1, max_run_time_s=0.6, min_samples=6, warmup_runs=2, warmup_max_s=0.25)
PEAKS = DevicePeaks(peak_tflops=1.0, peak_gbps=10.0, source="test-fixed")


def cost(flops: float, bytes_moved: float) -> Any:
    """Only the two fields the estimate reads."""
    return type("Cost", (), {"flops": flops, "bytes_moved": bytes_moved})()


# --- the rules, on synthetic per-call times ------------------------------------------------------------------


def test_a_fast_call_is_timed_for_the_minimum_run_time_in_blocks() -> None:
    """1 ms calls: blocks of round(16.7 ms / 1 ms) = 17 calls, 6 samples (≥ 0.1 s), warm-up of three blocks."""
    assert est.timed_s(1e-3, TIMING) == pytest.approx(6 * 17e-3)
    assert est.warmup_s(1e-3, TIMING) == pytest.approx(3 * 0.1 / 6)


def test_a_slow_call_is_timed_one_call_a_sample_and_the_cap_bounds_it() -> None:
    """50 ms calls: one call a block, 6 samples (0.3 s); 200 ms calls: the 0.6 s cap ends it after the sample
    that crossed it; warm-up stops at warmup_max_s."""
    assert est.timed_s(0.05, TIMING) == pytest.approx(0.3)
    assert est.timed_s(0.2, TIMING) == pytest.approx(0.8)
    assert est.warmup_s(0.05, TIMING) == pytest.approx(0.2)  # warmup_runs + 2 calls
    assert est.warmup_s(0.2, TIMING) == TIMING.warmup_max_s


def test_a_row_adds_its_checked_and_profiled_calls_and_its_overhead() -> None:
    per_call_s = 0.05
    timed = est.warmup_s(per_call_s, TIMING) + est.timed_s(per_call_s, TIMING)
    row_s = est.row_seconds(per_call_s, TIMING)
    assert row_s == pytest.approx(timed + (1 + 1) * per_call_s + est.ROW_OVERHEAD_S)  # one checked, one profiled


def test_the_modelled_call_is_the_slower_roof_at_the_assumed_efficiency() -> None:
    compute_bound = cost(flops=2e9, bytes_moved=1e6)  # 2 ms of compute, 0.1 ms of traffic at the roofs
    memory_bound = cost(flops=1e6, bytes_moved=1e8)  # 10 ms of traffic
    assert est.modelled_call_s(compute_bound, PEAKS) == pytest.approx(2e-3 / est.MODELLED_EFFICIENCY + 1e-4)
    assert est.modelled_call_s(memory_bound, PEAKS) == pytest.approx(1e-2 / est.MODELLED_EFFICIENCY + 1e-4)
    assert est.modelled_call_s(None, PEAKS) == est.CALL_OVERHEAD_S  # a bare plugin: no model


def test_an_earlier_runs_latency_wins_over_the_model_and_processes_multiply_the_rows() -> None:
    rows = [est.PlannedRow("c/1", "naive", cost(2e9, 1e6), PEAKS), est.PlannedRow("c/1", "fused", None, PEAKS)]
    one = est.estimate_run(rows, TIMING, known_ms={("c/1", "naive"): 50.0, ("c/1", "fused"): math.nan})
    assert [(row.source, row.per_call_s) for row in one.rows] == [
        ("history", pytest.approx(0.05)),
        ("modelled", est.CALL_OVERHEAD_S),
    ]
    assert one.sources() == {"history": 1, "modelled": 1}
    rows_s = sum(row.seconds for row in one.rows)
    assert one.total_s == pytest.approx(est.PROCESS_START_S + rows_s + est.ROOFLINE_PROBE_S + est.ANSWER_S)
    three = dataclasses.replace(one, processes=3)
    assert three.total_s == pytest.approx(4 * est.PROCESS_START_S + 3 * rows_s + est.ROOFLINE_PROBE_S + est.ANSWER_S)
    forked = est.estimate_run(rows, TIMING, processes=3, forked=True, known_ms={("c/1", "naive"): 50.0})
    expected = est.PROCESS_START_S + 3 * (est.FORKED_START_S + rows_s) + est.ROOFLINE_PROBE_S + est.ANSWER_S
    assert forked.total_s == pytest.approx(expected)
    assert est.estimate_run(rows, TIMING, forked=True).process_start_s == est.PROCESS_START_S  # one process: no fork
    twice = est.estimate_run(rows, TIMING, repeats=2, probed=False)
    assert sum(r.seconds for r in twice.rows) == pytest.approx(
        2 * sum(r.seconds for r in est.estimate_run(rows, TIMING).rows)
    )
    assert twice.probe_s == 0


def test_time_left_of_a_replicated_run_is_the_finished_processes_mean_times_those_left() -> None:
    assert est.processes_left_s(3, [10.0]) == pytest.approx(20.0)
    assert est.processes_left_s(3, [10.0, 14.0]) == pytest.approx(12.0)
    assert est.processes_left_s(3, [10.0, 14.0, 9.0]) == 0.0
    run_dir = Path("results/20261129T061756Z-default")
    said = replicate_line(ReplicateProgress(1, 3, run_dir, 9.84, 19.6))
    assert said == "process 1/3 done: repeat 0 of 20261129T061756Z-default (9.8 s; about 20 s left)"
    said = replicate_line(ReplicateProgress(3, 3, run_dir, 9.84, 0.0))
    assert said == "process 3/3 done: repeat 2 of 20261129T061756Z-default (9.8 s)"


# --- the dry run ---------------------------------------------------------------------------------------------


def _history_with(directory: Path, latencies: dict[tuple[str, str], list[float]]) -> None:
    run = RunRecord("r1", "2026-01-01T00:00:00", "complete", "naive", Fingerprint.of({"torch": "2.13"}), "{}")
    records = []
    for (case_id, impl), values in latencies.items():
        for repeat, latency_ms in enumerate(values):
            metrics = dict.fromkeys(RowRecord.__dataclass_fields__, 1.0)
            identity = {"run_id": "r1", "case_id": case_id, "case": case_id, "impl": impl, "repeat": repeat}
            fields = {"status": "ok", "commit": "abc", "commit_time": 1, "dirty": False, "repo": None}
            records.append(RowRecord(**{**metrics, **identity, **fields, "latency_ms": latency_ms}))
    store.append(directory, run, records)


def test_a_history_store_gives_the_median_latency_of_each_case_and_implementation(tmp_path: Path) -> None:
    assert store.median_latencies_ms(tmp_path / "none") == {}
    _history_with(tmp_path, {("c/1", "naive"): [3.0, 1.0, 2.0], ("c/1", "fused"): [0.5]})
    assert store.median_latencies_ms(tmp_path) == {("c/1", "naive"): 2.0, ("c/1", "fused"): 0.5}


def test_dry_run_says_how_long_the_run_will_take_from_the_model_or_from_history(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps({**tiny_config_data, "implementations": ["naive", "fused"], "replicates": 3}))
    result = CliRunner().invoke(app, ["run", str(config), "--dry-run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "estimated run time: about" in result.output and "3 processes × (start-up 0.7 s + 2 rows" in result.output
    assert "2 rows modelled (cost model at 30% of this machine's roofs)" in result.output
    case_id = runner.plan(parse_config(tiny_config_data, "tiny.yaml"))[0].case.case_id
    _history_with(tmp_path / "history", {(case_id, "naive"): [400.0]})
    with_history = ["run", str(config), "--dry-run", "--history", str(tmp_path / "history")]
    result = CliRunner().invoke(app, [*with_history, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "1 rows from earlier runs of the same cases; 1 rows modelled" in result.output
    assert not (tmp_path / "out").exists()


def test_the_estimate_of_a_planned_run_uses_this_devices_roofs(
    tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = parse_config(tiny_config_data, "tiny.yaml")
    planned = runner.plan(config)
    estimate = runner.estimate(config, planned)
    assert [row.impl for row in estimate.rows] == [row.case.impl for row in planned]
    first = planned[0]
    assert estimate.rows[0].per_call_s == pytest.approx(est.modelled_call_s(first.cost, fixed_peaks))
    assert estimate.probe_s == 0  # the fixed peaks are not a probe of this machine


# --- how long a run took -------------------------------------------------------------------------------------


def test_the_run_time_line_splits_measuring_from_everything_else() -> None:
    manifest = Manifest.model_validate(
        {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:12.500000+00:00"}
    )
    assert run_time.measuring_spans_s(manifest) == [12.5]
    line = run_time.run_time_line(20.0, [12.5])
    assert line.startswith("wall time 20.0 s: measuring 12.5 s (1 process), everything else 7.5 s")
    replicated = Manifest.model_validate(
        {
            "replicates": 2,
            "replicated_from": [
                {"started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:00:06+00:00"},
                {"started_at": "2026-01-01T00:00:08+00:00", "finished_at": "2026-01-01T00:00:15+00:00"},
            ],
        }
    )
    spans = run_time.measuring_spans_s(replicated)
    assert spans == [6.0, 7.0]
    assert "measuring 13.0 s (2 processes: 6.0 + 7.0 s), everything else 7.0 s" in run_time.run_time_line(20.0, spans)
    with_rows = run_time.run_time_line(20.0, spans, timed_s=9.0, rows=100)
    assert "(2 processes: 6.0 + 7.0 s; timed calls 9.0 s, the rest 40 ms a row), everything else 7.0 s" in with_rows


def test_the_timed_calls_are_the_rows_samples_times_their_block_size() -> None:
    def row(times_ms: tuple[float, ...], calls: int) -> Any:
        latency = type("Latency", (), {"times_ms": times_ms, "calls_per_sample": calls})()
        return type("Row", (), {"latency": latency})()

    failed = type("Row", (), {"latency": None})()
    assert run_time.timed_calls_s([row((1.0, 2.0), 10), row((100.0,), 1), failed]) == pytest.approx(0.13)


def test_the_process_age_reads_procs_start_time(tmp_path: Path) -> None:
    """/proc/uptime 100 s, the process started at tick 9000 of 100 a second: 10 s old."""
    (tmp_path / "self").mkdir()
    (tmp_path / "uptime").write_text("100.00 50.00\n")
    fields = ["S", *["0"] * 18, "9000", "0"]  # state, then fields 4–21; starttime is field 22
    (tmp_path / "self" / "stat").write_text(f"123 (python (x)) {' '.join(fields)}\n")
    assert run_time.process_age_s(tmp_path) == pytest.approx(100.0 - 9000 / run_time.os.sysconf("SC_CLK_TCK"))
    assert run_time.process_age_s(tmp_path / "missing") >= 0  # elsewhere: since the module was imported


# --- the replicate entry point -------------------------------------------------------------------------------


def test_a_replicate_runs_the_slim_entry_point_with_the_first_replicates_roofs(tmp_path: Path) -> None:
    command = child_command(tmp_path / "c.json", tmp_path / "out", Replicate(1, 3), ["p.py"], tmp_path / "r.json")
    assert command[1:3] == ["-m", "mhabench.cli_replicate"]
    assert command[3:6] == [str(tmp_path / "c.json"), str(tmp_path / "out"), "1/3"]
    assert command[6:] == ["--roofline", str(tmp_path / "r.json"), "--plugin", "p.py"]
    assert "--roofline" not in child_command(tmp_path / "c.json", tmp_path / "out", Replicate(0, 3), [])
    roofline = tmp_path / "r.json"
    roofline.write_text(json.dumps({"float32": dataclasses.asdict(PEAKS)}))
    assert read_roofline(roofline) == {"float32": PEAKS}


def test_known_roofs_are_not_probed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    def probe(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
        return dataclasses.replace(PEAKS, source=f"probed {dtype}")

    monkeypatch.setattr(runner, "device_peaks", probe)
    found = runner.roofline_peaks(torch.device("cpu"), ["bfloat16", "float32"], {"float32": PEAKS})
    assert found == {"bfloat16": dataclasses.replace(PEAKS, source="probed torch.bfloat16"), "float32": PEAKS}


def test_modelled_cost_fields_the_estimate_reads_exist() -> None:
    assert {"flops", "bytes_moved"} <= {field.name for field in dataclasses.fields(ModelledCost)}
