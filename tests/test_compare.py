"""``mhabench compare``: statistics with known answers, Holm, verdicts, exit codes, comparability, outputs."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from synthetic_runs import make_older, rounds, row, samples, write_run
from typer.testing import CliRunner

from mhabench.analysis import compare, stats
from mhabench.analysis.verdict import Change, Note, RowNote
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.results.columns import CASE_KEY
from mhabench.results.store import load_run
from mhabench.views.compare import comparison_table, summary_line
from mhabench.views.machine import notes_text

cli = CliRunner()
COLOUR_SGR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|38;[25];[0-9;]+)(?:;[0-9;]*)?m")


def two_runs(tmp_path: Path, factor: float, spread: float, **candidate_env: object) -> tuple[Path, Path]:
    """Base and candidate with one fused row each: candidate median = ``factor`` × base median."""
    base = write_run(tmp_path, "base", [row("fused", samples(10.0, spread, seed=1))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(10.0 * factor, spread, seed=2))], **candidate_env)
    return base, candidate


def verdict_of(base: Path, candidate: Path, threshold: float = 0.05) -> pd.Series:
    comparison = compare.compare_runs(load_run(base), load_run(candidate), threshold)
    return comparison.rows.iloc[0]


# --- statistics on synthetic samples -----------------------------------------------------------


def test_identical_samples_are_the_same(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", [row("fused", samples(10.0, 0.02, seed=1))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(10.0, 0.02, seed=1))])
    result = verdict_of(base, candidate)
    assert result["verdict"] == "same"
    assert result["ratio"] == pytest.approx(1.0)
    assert result["ci_low"] <= 1.0 <= result["ci_high"]


def test_tight_20_percent_shift_is_slower_and_significant(tmp_path: Path) -> None:
    result = verdict_of(*two_runs(tmp_path, factor=1.2, spread=0.01))
    assert result["verdict"] == "slower"
    assert result["p_holm"] < 0.001
    assert result["ci_low"] < 1.2 < result["ci_high"] and result["ci_low"] > 1.1


def test_tight_20_percent_speedup_is_faster(tmp_path: Path) -> None:
    assert verdict_of(*two_runs(tmp_path, factor=1 / 1.2, spread=0.01))["verdict"] == "faster"


def test_noisy_20_percent_shift_is_undecided(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", [row("fused", samples(10.0, 0.8, count=8, seed=1))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(12.0, 0.8, count=8, seed=2))])
    result = verdict_of(base, candidate)
    assert abs(result["ratio"] - 1) > 0.05  # past the threshold...
    assert result["p_holm"] >= stats.ALPHA  # ...but not significant
    assert result["verdict"] == "~"


def test_holm_on_known_p_values() -> None:
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → monotone 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = stats.holm([0.2, math.nan, 0.9])
    assert adjusted[0] == pytest.approx(0.4) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.9)
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1


def test_a_point_near_one_whose_interval_reaches_past_the_threshold_is_not_same(tmp_path: Path) -> None:
    """Issue 29: ``1.011 [0.967, 1.187] → same`` overstated; an interval that reaches +19 % is ``~``."""
    base = write_run(tmp_path, "base", [row("fused", samples(10.0, 0.15, count=8, seed=3))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(10.0, 0.15, count=8, seed=4))])
    result = verdict_of(base, candidate)
    assert abs(result["ratio"] - 1) < 0.05 and result["ci_high"] > 1.05  # the point says same...
    assert result["verdict"] == "~"  # ...the interval does not


def test_an_interval_wholly_past_the_threshold_is_slower_whatever_the_p_value(tmp_path: Path) -> None:
    """Issue 29: ``1.169 [1.066, 1.311] p=0.14 → ~`` understated; the verdict follows the interval."""
    base_rows = [row(f"impl{i}", samples(10.0, 0.02, count=6, seed=i)) for i in range(30)]
    cand_rows = [row(f"impl{i}", samples(10.0, 0.02, count=6, seed=50 + i)) for i in range(29)]
    cand_rows.append(row("impl29", samples(11.7, 0.02, count=6, seed=99)))
    base, candidate = write_run(tmp_path, "base", base_rows), write_run(tmp_path, "cand", cand_rows)
    rows = compare.compare_runs(load_run(base), load_run(candidate), 0.05).rows.set_index("impl")
    shifted = rows.loc["impl29"]
    assert shifted["ci_low"] > 1.05 and shifted["p_holm"] >= stats.ALPHA  # 30 rows tested: Holm is strict
    assert shifted["verdict"] == "slower"


def test_bootstrap_is_reproducible_and_degrades_without_samples() -> None:
    first = stats.ratio_of_medians(samples(12, 0.05, seed=3), samples(10, 0.05, seed=4))
    assert first == stats.ratio_of_medians(samples(12, 0.05, seed=3), samples(10, 0.05, seed=4))
    single = stats.ratio_of_medians([12.0], [10.0])
    assert single.ratio == pytest.approx(1.2) and math.isnan(single.ci_low) and math.isnan(single.ci_high)
    assert math.isnan(stats.mann_whitney_p([1.0], [2.0, 3.0]))


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), ("0.05", 0.05), ("12.5%", 0.125), (0.1, 0.1)])
def test_threshold_accepts_percent_and_fraction(text: str | float, value: float) -> None:
    assert stats.parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["five", "-3%", "nan"])
def test_bad_threshold_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError, match="--threshold"):
        stats.parse_threshold(text)


# --- matching rows -----------------------------------------------------------------------------


def test_unmatched_and_failed_rows_are_listed_not_compared(tmp_path: Path) -> None:
    base = write_run(
        tmp_path,
        "base",
        [
            row("naive", samples(10, 0.01)),
            row("fused", samples(5, 0.01)),
            row("per_head", samples(7, 0.01)),
        ],
    )
    candidate = write_run(
        tmp_path,
        "cand",
        [
            row("naive", samples(10, 0.01)),
            row("fused", [], status="oom", error="out of memory"),
            row("torch_mha", samples(6, 0.01)),
        ],
    )
    rows = compare.compare_runs(load_run(base), load_run(candidate), 0.05).rows.set_index("impl")
    assert rows.loc["naive", "verdict"] == "same"
    (failed,) = rows.loc["fused", "notes"]
    assert rows.loc["fused", "verdict"] == "not compared"
    assert failed == Note(RowNote.NOT_OK, {"side": "candidate", "status": "oom", "error": "out of memory"})
    assert notes_text(rows.loc["fused", "notes"]) == "candidate oom: out of memory"
    assert rows.loc["per_head", "verdict"] == "only in base"
    assert rows.loc["torch_mha", "verdict"] == "only in candidate"


def test_a_reason_both_runs_share_is_said_once(tmp_path: Path) -> None:
    reason = "does not support a key/value cache (decode phase)"
    base = write_run(
        tmp_path, "base", [row("naive", samples(10, 0.01)), row("flex", [], status="unsupported", error=reason)]
    )
    candidate = write_run(
        tmp_path, "cand", [row("naive", samples(10, 0.01)), row("flex", [], status="unsupported", error=reason)]
    )
    notes = compare.compare_runs(load_run(base), load_run(candidate), 0.05).rows.set_index("impl").loc["flex", "notes"]
    assert notes == (Note(RowNote.NOT_OK, {"side": "both", "status": "unsupported", "error": reason}),)
    assert notes_text(notes) == f"both unsupported: {reason}"


def test_the_output_files_hold_each_note_in_words_and_by_code(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", [row("naive", samples(10, 0.01)), row("fused", samples(4, 0.01))])
    candidate = write_run(
        tmp_path, "cand", [row("naive", samples(10, 0.01)), row("fused", [], status="oom", error="out of memory")]
    )
    for suffix in ("csv", "json"):
        target = tmp_path / f"out.{suffix}"
        assert cli.invoke(app, ["compare", str(base), str(candidate), "--output", str(target)]).exit_code == 0
    written = pd.read_csv(tmp_path / "out.csv").set_index("impl")
    assert "notes" not in written and written.loc["fused", "note"] == "candidate oom: out of memory"
    assert written.loc["fused", "note_codes"] == "not_ok" and pd.isna(written.loc["naive", "note_codes"])
    rows = {one["impl"]: one for one in json.loads((tmp_path / "out.json").read_text())["rows"]}
    assert rows["fused"]["note_codes"] == "not_ok" and rows["naive"]["note"] == ""


def test_the_summary_counts_verdicts_and_names_a_run_wide_shift(tmp_path: Path) -> None:
    """Issue 29: every row 4–21 % slower and no line said so; the summary judges the shift like a row."""
    factors = [1.04, 1.08, 1.12, 1.16, 1.21]
    base_rows = [row(f"impl{i}", samples(10.0, 0.01, seed=i)) for i in range(5)]
    cand_rows = [row(f"impl{i}", samples(10.0 * f, 0.01, seed=20 + i)) for i, f in enumerate(factors)]
    comparison = compare.compare_runs(
        load_run(write_run(tmp_path, "base", base_rows)), load_run(write_run(tmp_path, "cand", cand_rows)), 0.05
    )
    summary = comparison.summary
    assert summary is not None and summary.shift_verdict is Change.SLOWER
    assert summary.counts["slower"] == 4 and 1.10 < summary.shift < 1.13
    line = summary_line(comparison)
    assert line is not None and "4 slower" in line and "run-wide shift: the candidate is 12% slower" in line
    result = cli.invoke(app, ["compare", str(tmp_path / "base"), str(tmp_path / "cand")])
    assert result.exit_code == 0 and "run-wide shift" in result.stdout


def test_no_run_wide_shift_when_rows_agree(tmp_path: Path) -> None:
    base_rows = [row(f"impl{i}", samples(10.0, 0.01, seed=i)) for i in range(4)]
    cand_rows = [row(f"impl{i}", samples(10.0, 0.01, seed=i)) for i in range(4)]
    comparison = compare.compare_runs(
        load_run(write_run(tmp_path, "base", base_rows)), load_run(write_run(tmp_path, "cand", cand_rows)), 0.05
    )
    assert comparison.summary is not None and comparison.summary.shift_verdict is Change.SAME
    assert "no run-wide shift" in str(summary_line(comparison))


def test_match_key_uses_the_schema_key_columns_present_in_both() -> None:
    frame = pd.DataFrame({c: [1] for c in [*CASE_KEY, "scenario"]})
    assert compare.match_key(frame, frame) == CASE_KEY
    assert {"kv_heads", "mode", "phase"} <= set(CASE_KEY)
    older = frame.drop(columns="mode")  # a run written before the column existed
    assert compare.match_key(frame, older) == [c for c in CASE_KEY if c != "mode"]
    twice = pd.concat([frame, frame.assign(scenario=2)])  # one shape measured by two scenarios
    assert compare.match_key(twice, frame) == [*CASE_KEY, "scenario"]


def test_within_run_speedup_and_winner(tmp_path: Path) -> None:
    run = write_run(tmp_path, "one", [row("naive", samples(10, 0.01)), row("fused", samples(4, 0.01))])
    rows = compare.speedups(load_run(run), "naive").rows.set_index("impl")
    # same seed: fused's sample i is exactly 0.4 × naive's, so every round's ratio is 2.5
    assert rows.loc["fused", ["speedup", "speedup_ci_low", "speedup_ci_high"]].tolist() == pytest.approx([2.5] * 3)
    assert rows.loc["fused", "pick"] == "winner" and rows.loc["naive", "pick"] == ""  # the run's answer
    assert rows.loc["naive", "memory_ratio"] == pytest.approx(1.0)


def test_within_run_speedups_are_paired_by_round(tmp_path: Path) -> None:
    times = rounds({"naive": 10.0, "fused": 4.0, "per_head": 8.0}, count=20, drift=0.3, seed=5)
    run = write_run(tmp_path, "one", [row(impl, ms) for impl, ms in times.items()])
    rows = compare.speedups(load_run(run), "naive").rows.set_index("impl")
    assert set(rows["speedup_method"]) == {"paired"}
    assert rows.loc["fused", "speedup_ci_low"] < 2.5 < rows.loc["fused", "speedup_ci_high"]
    assert rows.loc["fused", "speedup_ci_high"] - rows.loc["fused", "speedup_ci_low"] < 0.1  # drift cancels
    result = cli.invoke(app, ["compare", str(run)])
    assert result.exit_code == 0, result.output
    assert "median of per-round ratios" in result.stdout and "paired" in result.stdout and "2.5" in result.stdout


def test_an_older_run_matches_a_new_one_on_the_key_defaults(tmp_path: Path) -> None:
    """A format-2 run has no repeat or tensor_parallel column: it reads as repeat 0, tensor_parallel 1."""
    older = make_older(
        write_run(tmp_path, "old", [row("naive", samples(10, 0.01, count=12)), row("fused", samples(4, 0.01, count=9))])
    )
    new = write_run(tmp_path, "new", [row("naive", samples(10, 0.01, seed=3)), row("fused", samples(4, 0.01, seed=4))])
    assert "repeat" not in pd.read_csv(older / "results.csv").columns
    comparison = compare.compare_runs(load_run(older), load_run(new), 0.05)
    assert {"repeat", "tensor_parallel"} <= set(compare.match_key(load_run(older).frame, load_run(new).frame))
    assert list(comparison.rows["verdict"]) == ["same", "same"]
    within = compare.speedups(load_run(older), "naive").rows.set_index("impl")
    assert within.loc["fused", "speedup_method"] == "paired"  # one rounds_id: the 9 rounds both took part in
    assert within.loc["fused", "speedup"] == pytest.approx(2.5, rel=0.03)


def test_repeats_are_matched_repeat_by_repeat(tmp_path: Path) -> None:
    base = write_run(tmp_path, "base", [row("fused", samples(4, 0.01, seed=1))])
    candidate = write_run(tmp_path, "cand", [row("fused", samples(4, 0.01, seed=r), repeat=r) for r in range(2)])
    comparison = compare.compare_runs(load_run(base), load_run(candidate), 0.05)
    assert list(zip(comparison.rows["repeat"], comparison.rows["verdict"], strict=True)) == [
        (0, "same"),
        (1, "only in candidate"),
    ]
    assert "rep" in comparison_table(comparison).headers


# --- the command -------------------------------------------------------------------------------


def test_fail_on_regression_exit_codes(tmp_path: Path) -> None:
    slow_base, slow_cand = two_runs(tmp_path / "slow", factor=1.3, spread=0.01)
    same_base, same_cand = two_runs(tmp_path / "same", factor=1.0, spread=0.01)
    regressed = cli.invoke(app, ["compare", str(slow_base), str(slow_cand), "--fail-on-regression"])
    assert regressed.exit_code == 1, regressed.output
    assert "slower" in regressed.stdout and "regression" in regressed.stderr
    assert cli.invoke(app, ["compare", str(slow_base), str(slow_cand)]).exit_code == 0
    unchanged = cli.invoke(app, ["compare", str(same_base), str(same_cand), "--fail-on-regression"])
    assert unchanged.exit_code == 0, unchanged.output
    # a 30% slowdown is below a 50% threshold: not a regression
    lenient = cli.invoke(app, ["compare", str(slow_base), str(slow_cand), "--threshold", "50%", "--fail-on-regression"])
    assert lenient.exit_code == 0, lenient.output


def test_comparability_differences_are_printed(tmp_path: Path) -> None:
    base, candidate = two_runs(tmp_path, factor=1.0, spread=0.01, threads=8, torch="2.14.0")
    result = cli.invoke(app, ["compare", str(base), str(candidate)])
    assert result.exit_code == 0, result.output
    assert "Runs differ in" in result.stdout and "threads: 2 → 8" in result.stdout and "torch: 2.13.0" in result.stdout


def test_different_device_kinds_are_refused_unless_forced(tmp_path: Path) -> None:
    base, candidate = two_runs(tmp_path, factor=1.0, spread=0.01, device_kind="cuda", device_name="NVIDIA H100")
    refused = cli.invoke(app, ["compare", str(base), str(candidate)])
    assert refused.exit_code == 2
    assert "--force" in refused.stderr and "Traceback" not in refused.output
    forced = cli.invoke(app, ["compare", str(base), str(candidate), "--force"])
    assert forced.exit_code == 0, forced.output
    assert "device_kind: cpu → cuda" in forced.stdout


def test_output_files_by_extension(tmp_path: Path) -> None:
    base, candidate = two_runs(tmp_path, factor=1.3, spread=0.01, threads=4)
    for suffix in ("csv", "json", "md"):
        target = tmp_path / f"out.{suffix}"
        result = cli.invoke(app, ["compare", str(base), str(candidate), "--output", str(target)])
        assert result.exit_code == 0, result.output
    assert pd.read_csv(tmp_path / "out.csv")["verdict"].tolist() == ["slower"]
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["rows"][0]["verdict"] == "slower" and data["threshold"] == pytest.approx(0.05)
    assert {"field": "threads", "base": "2", "candidate": "4"} in data["differences"]
    markdown = (tmp_path / "out.md").read_text()
    assert "| case | impl |" in markdown and "slower" in markdown and "threads: 2 → 4" in markdown


def test_within_run_command_and_output(tmp_path: Path) -> None:
    run = write_run(tmp_path, "one", [row("naive", samples(10, 0.01)), row("fused", samples(4, 0.01))])
    result = cli.invoke(app, ["compare", str(run), "--output", str(tmp_path / "s.md")])
    assert result.exit_code == 0, result.output
    assert "speedup vs naive" in result.stdout and "2.5" in result.stdout
    assert "★" in (tmp_path / "s.md").read_text()


def test_within_run_baseline_is_a_setting(tmp_path: Path) -> None:
    run = write_run(tmp_path, "one", [row("naive", samples(10, 0.01)), row("fused", samples(4, 0.01))])
    rows = compare.speedups(load_run(run), "fused").rows.set_index("impl")
    assert rows.loc["naive", "speedup"] == pytest.approx(0.4, rel=0.03)
    assert rows.loc["fused", "speedup"] == pytest.approx(1.0)
    result = cli.invoke(app, ["compare", str(run), "--baseline", "fused"])
    assert result.exit_code == 0, result.output
    assert "speedup vs fused" in result.stdout and "speedup vs naive" not in result.stdout


def bad_input_cases(tmp_path: Path) -> list[list[str]]:
    base, _ = two_runs(tmp_path, factor=1.0, spread=0.01)
    other = write_run(tmp_path, "other", [row("fused", samples(10, 0.01), seq_len=4096)])
    corrupt = write_run(tmp_path, "corrupt", [row("fused", samples(10, 0.01))])
    (corrupt / "results.parquet").write_bytes(b"not parquet at all")
    (tmp_path / "empty").mkdir()
    return [
        ["compare", str(tmp_path / "empty")],
        ["compare", str(corrupt)],
        ["compare", "no-such-run", "--results-root", str(tmp_path)],
        ["compare", str(base), str(other)],
        ["compare", str(base), "--baseline", "nope"],
        ["compare", str(base), str(base), "--output", str(tmp_path / "x.txt")],
        ["compare", str(base), str(base), "--threshold", "lots"],
        ["compare", str(base), "--fail-on-regression"],
    ]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in bad_input_cases(tmp_path):
        result = cli.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)
        assert "Traceback" not in result.output


def test_latest_and_run_id_are_resolved(tmp_path: Path) -> None:
    two_runs(tmp_path, factor=1.0, spread=0.01)
    result = cli.invoke(app, ["compare", "base", "latest", "--results-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "base → " in result.stdout


def test_colour_follows_no_color(tmp_path: Path) -> None:
    base, candidate = two_runs(tmp_path, factor=1.3, spread=0.01)
    coloured = cli.invoke(app, ["compare", str(base), str(candidate)], env={"FORCE_COLOR": "1", "NO_COLOR": None})
    plain = cli.invoke(app, ["compare", str(base), str(candidate)], env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert COLOUR_SGR.search(coloured.stdout), "the verdict should be coloured"
    assert not COLOUR_SGR.search(plain.stdout), "NO_COLOR must remove every colour"
    assert "slower" in plain.stdout
