"""``mhabench advise`` from the command line, the report's Advice section, and the answer under ``mhabench run``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from synthetic_runs import HOSTILE, calibrate_test_machine, rounds, row, write_run
from typer.testing import CliRunner, Result

from mhabench.analysis.advice.advise import advise
from mhabench.answers_on_disk import answer_at_end
from mhabench.cli import app
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.store import load_run
from mhabench.views.advice import short_answer, statements
from mhabench.views.wording import sentence

"""Statements about manifests or the question asked, not about rows; every other one names its rows."""


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def crossover_run(root: Path, name: str = "sweep") -> Path:
    """n = 128 and 512 tied, n = 2048 won by fused; one skipped row with a hostile message."""
    records = []
    for seq_len, naive_ms in ((128, 1.0), (512, 1.0), (2048, 2.0)):
        times = rounds({"naive": naive_ms, "fused": 1.0}, noise=0.03, seed=seq_len)
        records += [row(impl, times[impl], seq_len=seq_len) for impl in times]
    records.append(row("per_head", [], seq_len=2048, status="skipped", error=f"too big {HOSTILE}"))
    return write_run(root, name, records)


def test_terminal_output_gives_the_group_answer_then_one_action_per_case(tmp_path: Path) -> None:
    result = invoke("advise", crossover_run(tmp_path))
    assert result.exit_code == 0, result.output
    assert "sweep: n = 128 … 512: fused and naive tied; n = 2048: fused wins." in result.output
    assert "→ use fused: " in result.output and "faster than naive, because " in result.output
    assert "→ use either fused or naive: no clear winner" in result.output
    assert "Across the cases" in result.output and "The answer changes between the measured n=512 and n=2048" in (
        result.output.replace("\n", " ")
    )
    assert HOSTILE in result.output  # shown as text, never read as markup


def test_advise_says_each_case_label_once_and_is_shorter_than_its_statements(tmp_path: Path) -> None:
    """Issue 29: about 465 words for two cases, the full case label on every line."""
    run_dir = crossover_run(tmp_path)
    found = advise([load_run(run_dir)])
    output = invoke("advise", run_dir, "--format", "md").output
    label = "n=2048 h=4 d=64 b=1 float32"
    said = [s for run in found.runs for s in statements(run)]
    statements_about = [s for s in said if s.scope == label]
    assert len(statements_about) >= 3 and output.count(f"{label}: ") == 1  # its heading line, once
    every_statement = sum(len(sentence(s).split()) for s in said)
    assert len(output.split()) < 0.8 * every_statement


def test_a_new_kind_of_statement_slots_in_under_its_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other rules add kinds (energy, replication, citations): a new code needs its template, the layout no change."""
    import dataclasses

    from mhabench.analysis.statement import Statement
    from mhabench.views import wording
    from mhabench.views.advice import layout

    times = rounds({"naive": 2.0, "fused": 1.0}, seed=1)
    run = advise([load_run(write_run(Path(tempfile.mkdtemp()), "new", [row(i, times[i]) for i in times]))]).runs[0]
    pick = next(s for s in statements(run) if s.rule == "pick")
    monkeypatch.setitem(wording.TEMPLATES, "joules", lambda figures: f"fused uses {figures['fewer']}× fewer joules.")
    energy = Statement("energy", "joules", pick.group, pick.scope, {"fewer": 2})
    (group,) = layout(dataclasses.replace(run, statements=(*run.statements, energy)))
    (case,) = group.cases
    assert case.evidence[-1] == "fused uses 2× fewer joules."


def test_markdown_escapes_what_the_run_wrote(tmp_path: Path) -> None:
    result = invoke("advise", crossover_run(tmp_path), "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# mhabench advise\n")
    assert "**sweep: n = 128 … 512: `fused` and `naive` tied; n = 2048: `fused` wins.**" in result.output
    assert HOSTILE not in result.output and "&lt;script&gt;" in result.output


def test_json_is_the_record_with_codes_and_numbers(tmp_path: Path) -> None:
    result = invoke("advise", crossover_run(tmp_path), "--format", "json", "--for", "cuda", "--impl", "flex")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema_version"] == 2 and data["run_id"] == "sweep" and data["thresholds"]["tie_margin"] == 0.03
    assert [case["verdict"] for case in data["cases"]] == ["tie", "tie", "winner"]
    assert data["cases"][2]["pick"] == "fused" and data["cases"][0]["pick"] is None
    assert set(data["cases"][0]["tied"]) == {"fused", "naive"}
    (crossover,) = data["crossovers"]
    assert crossover["axis"] == "seq_len" and crossover["changes_between"] == [[512, 2048]]
    assert {"other_device", "not_measured"} <= {caveat["code"] for caveat in data["caveats"]}
    lead = data["cases"][2]["lead"]
    assert lead["method"] == "paired" and lead["ratio"] > 1 and lead["processes"] == 1
    assert "text" not in json.dumps(data)  # codes and numbers only: English is the views'
    assert data["notes"] == [{"code": "recomputed", "numbers": {"missing": "answers.json"}, "scope": "sweep"}]


def test_two_runs_add_where_their_picks_differ(tmp_path: Path) -> None:
    first = crossover_run(tmp_path, "first")
    times = rounds({"naive": 3.0, "fused": 1.0}, seed=9)
    second = write_run(tmp_path, "second", [row(i, times[i]) for i in times], device_name="Other CPU")
    result = invoke("advise", first, second, "--format", "markdown")
    assert result.exit_code == 0, result.output
    assert "## Across runs" in result.output and "the pick differs" in result.output


def assert_one_line_exit_2(result: Result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert fragment in result.output


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    run_dir = crossover_run(tmp_path)
    assert_one_line_exit_2(invoke("advise", tmp_path / "absent"), "no such run folder")
    assert_one_line_exit_2(invoke("advise", run_dir, "--format", "xml"), "--format: 'xml'")
    assert_one_line_exit_2(invoke("advise", run_dir, "--for", "tpu"), "--for: 'tpu'")


def test_one_format_vocabulary_for_advise_and_report(tmp_path: Path) -> None:
    """Issue 29: ``advise --format md`` was refused while ``report --format md`` was the only spelling there."""
    run_dir = crossover_run(tmp_path)
    as_md = invoke("advise", run_dir, "--format", "md")
    assert as_md.exit_code == 0, as_md.output
    assert as_md.stdout == invoke("advise", run_dir, "--format", "markdown").stdout
    report = invoke("report", run_dir, "--format", "markdown")
    assert report.exit_code == 0, report.output
    assert (run_dir / "report.md").exists() and not (run_dir / "report.html").exists()


def test_the_report_starts_with_the_advice(tmp_path: Path) -> None:
    run_dir = crossover_run(tmp_path)
    result = invoke("report", run_dir, "--format", "md")
    assert result.exit_code == 0, result.output
    text = (run_dir / "report.md").read_text()
    assert text.index("## Advice") < text.index("## Plots")
    assert "sweep: n = 128 … 512: `fused` and `naive` tied; n = 2048: `fused` wins." in text


def test_the_short_answer_is_three_to_five_lines_with_a_why_and_the_command(tmp_path: Path) -> None:
    run_dir = crossover_run(tmp_path)
    calibrate_test_machine(0.02)  # n=2048's lead clears it (uncalibrated, the caveat would come first)
    lines = short_answer(answer_at_end(load_run(run_dir)), run_dir)  # the calibration the run records
    assert 3 <= len(lines) <= 5
    assert lines[0].startswith("Answer: sweep: n = 128 … 512") and lines[1].startswith("Why: n=2048")
    assert lines[-1].endswith(f"mhabench advise {run_dir}")


def test_run_prints_the_short_answer_under_its_table(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**tiny_config_data, "implementations": ["naive", "fused"]}), encoding="utf-8")
    result = invoke("run", config, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").iterdir()
    lines = short_answer(advise([load_run(run_dir)]), run_dir)
    assert 3 <= len(lines) <= 5
    flat = " ".join(result.output.split())
    table_end, results_line = flat.index("└"), flat.index(f"results: {run_dir}")
    for line in lines:
        assert table_end < flat.index(" ".join(line.split())) < results_line
