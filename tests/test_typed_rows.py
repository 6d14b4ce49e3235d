"""The read side speaks the write side's types: ``load_run`` gives typed rows and one cached frame, an older
format reads as typed rows with its key defaults, and a command that holds its rows (``run``'s short answer and
``--history`` append, a replicated run's merge) uses them instead of reading its folder back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from synthetic_runs import make_older, row, sweep_rows, write_run

from mhabench import cli_run
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.compare import compare_runs
from mhabench.analysis.verdict import Change, Unjudged
from mhabench.answers_on_disk import answer_at_end
from mhabench.results.manifest import Manifest
from mhabench.results.schema import ResultRow, RowStatus
from mhabench.results.store import CSV_NAME, PARQUET_NAME, held_run, load_run, read_frame
from mhabench.run.replicates import Replicate
from mhabench.run.runner import RunResult
from mhabench.views.advice import short_answer
from mhabench.views.compare import SUMMARY_ORDER


def test_a_loaded_run_holds_typed_rows_and_builds_its_frame_once(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "typed", sweep_rows()))
    assert run.rows and all(isinstance(r, ResultRow) for r in run.rows)
    assert all(isinstance(r.status, RowStatus) for r in run.rows)
    failed = [r for r in run.rows if r.status != RowStatus.OK]
    assert [r.status for r in failed] == [RowStatus.ERROR] and failed[0].latency is None
    assert run.frame is run.frame  # cached: built once, however many readers ask
    pd.testing.assert_frame_equal(run.frame, read_frame(run.rows))
    assert list(run.frame["impl"]) == [r.case.impl for r in run.rows]


def test_a_count_read_back_as_a_float_is_an_int_on_the_typed_row(tmp_path: Path) -> None:
    """A CSV column with an empty cell reads as floats (``samples`` 6.0): the row holds the 6 that was written."""
    run_dir = write_run(tmp_path, "counts", [row("naive", [1.0] * 6), row("fused", [], status="error", error="x")])
    (run_dir / PARQUET_NAME).unlink()
    assert pd.read_csv(run_dir / CSV_NAME)["samples"].tolist()[0] == 6.0
    ok = load_run(run_dir).rows[0]
    assert ok.latency is not None and ok.latency.samples == 6 and isinstance(ok.latency.samples, int)
    assert ok.outcome.error == ""  # an ok row's empty error is the "" the writer held, not None


def test_an_older_format_reads_as_typed_rows_with_its_key_defaults(tmp_path: Path) -> None:
    run_dir = make_older(write_run(tmp_path, "old", sweep_rows()), ("repeat", "tensor_parallel", "mask"))
    rows = load_run(run_dir).rows
    assert {(r.case.repeat, r.case.tensor_parallel) for r in rows} == {(0, 1)}
    assert {r.case.mask for r in rows} == {"none"}  # follows causal, False in every row


def _result_of(run_dir: Path) -> RunResult:
    """What ``runner.run`` hands the CLI: the typed rows it wrote and its final manifest."""
    run = load_run(run_dir)
    return RunResult(run_dir, list(run.rows), Manifest.model_validate(run.manifest.as_dict()))


def _remove_results(run_dir: Path) -> None:
    """A folder a reader can no longer read rows from: any read-back fails, held rows do not."""
    for name in (CSV_NAME, PARQUET_NAME):
        (run_dir / name).unlink()


def _short_answer_of(result: RunResult) -> list[str]:
    """The answer ``run`` prints under its table, from the rows and manifest the command holds (no read-back)."""
    advice = answer_at_end(held_run(result.run_dir, result.manifest, result.rows), "naive")
    return short_answer(advice, result.run_dir)


def test_the_short_answer_and_the_history_append_after_a_run_use_the_rows_it_holds(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "results", "held", sweep_rows())
    expected = short_answer(advise([load_run(run_dir)]), run_dir)
    result = _result_of(run_dir)
    _remove_results(run_dir)
    assert _short_answer_of(result) == expected
    cli_run.append_history(result, tmp_path / "history", "naive")  # reads nothing back: it would fail here
    assert (tmp_path / "history").is_dir()


def _fake_replicates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each replicate's child process replaced by a written folder: naive 1 ms slower in each next replicate."""
    from mhabench.run import replicates as replicated

    def fake_child(
        config_file: Path,
        out_root: Path,
        replicate: Replicate,
        plugin_files: Any,
        roofline: Any = None,
        fork: Any = None,
    ) -> Any:
        rows = [row("naive", [1.0 + replicate.index] * 6), row("fused", [0.5] * 6)]
        return write_run(out_root, f"replicate{replicate.index}", rows), None

    monkeypatch.setattr(replicated, "_run_child", fake_child)


def test_a_replicated_run_holds_its_merged_rows_and_final_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mhabench.run import replicates as replicated
    from mhabench.scenario.loading import parse_config

    _fake_replicates(monkeypatch)
    config = parse_config(
        {"name": "tiny", "replicates": 2, "scenarios": [{"seq_len": 16, "d_model": 32, "heads": 2}]}, "x"
    )
    result = replicated.run_replicated(config, tmp_path / "out", ["mhabench", "run"])
    back = load_run(result.run_dir)
    assert result.manifest.status == back.manifest.status == "complete"
    assert json.loads((result.run_dir / "manifest.json").read_text())["replicates"] == 2
    name = result.run_dir.name
    assert [(r.case.impl, r.case.repeat, r.case.run_id) for r in result.rows] == [
        ("naive", 0, name),
        ("fused", 0, name),
        ("naive", 1, name),
        ("fused", 1, name),
    ]
    pd.testing.assert_frame_equal(result.frame, back.frame)
    expected = short_answer(advise([back]), result.run_dir)
    _remove_results(result.run_dir)
    assert _short_answer_of(result) == expected


def test_compare_verdicts_are_enum_members_with_the_words_of_the_table(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", [row("naive", [1.0] * 8), row("fused", [0.5] * 8)])
    candidate = write_run(
        tmp_path, "cand", [row("naive", [1.0] * 8), row("fused", [], status="error", error="x"), row("per_head", [2.0])]
    )
    verdicts = dict(compare_runs(load_run(base), load_run(candidate), 0.05).rows[["impl", "verdict"]].to_numpy())
    assert verdicts == {
        "naive": Change.SAME,
        "fused": Unjudged.NOT_COMPARED,
        "per_head": Unjudged.ONLY_IN_CANDIDATE,
    }
    assert [verdicts["fused"], verdicts["per_head"]] == ["not compared", "only in candidate"]


def test_the_compare_summary_orders_every_verdict_word() -> None:
    assert set(SUMMARY_ORDER) == {*Change, *Unjudged}
    assert [str(v.value) for v in SUMMARY_ORDER][-3:] == ["not compared", "only in base", "only in candidate"]


def test_a_held_run_is_the_run_it_was_given() -> None:
    rows = [ResultRow.from_record({**row("naive", [1.0] * 6), "run_id": "h"})]
    manifest = Manifest.model_validate({"run_id": "h", "status": "complete"})
    run = held_run(Path("nowhere"), manifest, rows)
    assert run.rows == rows and run.rows is not rows and run.manifest is manifest and run.run_id == "h"


def test_calibrate_measures_the_replicated_run_it_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The spread is read off the merged rows the calibration run returns, the same as from the folder."""
    from mhabench.analysis import calibration

    _fake_replicates(monkeypatch)
    found, _ = calibration.calibrate(tmp_path, ["mhabench", "calibrate"], "cpu", 3)
    (run_dir,) = tmp_path.iterdir()
    assert found.processes == 3 and found.run_path == str(run_dir)
    assert found == calibration.calibration_of(load_run(run_dir))
