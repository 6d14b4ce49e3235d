"""The history: series per case, implementation and fingerprint; points per commit; steps; the gate; the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_runs import PLUGIN, commit_run, git, timeline
from typer.testing import CliRunner

from mhabench.analysis.verdict import Change
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.history import gate, series, store
from mhabench.history.ingest import add_run
from mhabench.history.provenance import code_versions, repository_version
from mhabench.impls.registry import get_spec
from mhabench.scenario.loading import parse_config

RUNNER = CliRunner()


def history_of(directory: Path, metric: str = "ratio", threshold: float = 0.05) -> series.History:
    return series.build(*store.read(directory), series.metric_named(metric), threshold)


def imported(tmp_path: Path, folders: list[Path]) -> Path:
    directory = tmp_path / "history"
    for folder in folders:
        add_run(directory, folder)
    return directory


def test_each_commit_is_one_point_pooling_its_runs_in_commit_order(tmp_path: Path) -> None:
    folders = timeline(tmp_path / "runs", [0.5, 0.5, 0.5], runs_per_commit=2)
    found = history_of(imported(tmp_path, folders[::-1]))  # imported newest first: order comes from the commits
    (only,) = found.series
    assert only.impl == PLUGIN  # the baseline's ratio to itself is no series
    assert [point.commit for point in only.points] == ["c00", "c01", "c02"]
    assert all(len(point.runs) == 2 for point in only.points)
    assert all(point.low <= point.value <= point.high for point in only.points)
    assert only.points[0].value == pytest.approx(0.5, rel=0.03)


def test_a_regression_is_a_step_with_its_commit_range_size_and_interval(tmp_path: Path) -> None:
    folders = timeline(tmp_path / "runs", [0.5, 0.5, 0.5, 0.5, 0.65, 0.65, 0.65], runs_per_commit=2)
    (only,) = history_of(imported(tmp_path, folders)).series
    (step,) = only.steps
    assert (step.before, step.after) == ("c03", "c04")
    assert step.size == pytest.approx(1.3, rel=0.03)
    assert step.low <= step.size <= step.high and step.change is Change.SLOWER
    assert step.environment == {}


def test_a_torch_upgrade_starts_a_new_series_and_is_named_as_the_cause(tmp_path: Path) -> None:
    old = timeline(tmp_path / "old", [0.5] * 4, torch="2.11.0")
    new = [
        commit_run(tmp_path / "new", f"new-{i}", f"c{i + 4:02d}", 2000 + i, 0.7, seed=40 + i, torch="2.13.0")
        for i in range(4)
    ]
    found = history_of(imported(tmp_path, old + new))
    assert len(found.series) == 2  # never one series across fingerprints
    assert {s.fingerprint.torch for s in found.series} == {"2.11.0", "2.13.0"}
    assert all(not s.steps for s in found.series)
    ((before, after, step),) = found.handovers
    assert step.environment == {"torch": ("2.11.0", "2.13.0")}
    assert step.size == pytest.approx(1.4, rel=0.05) and step.change is Change.SLOWER
    assert before.fingerprint.torch == "2.11.0" and after.fingerprint.torch == "2.13.0"


def test_a_dirty_tree_is_its_own_point(tmp_path: Path) -> None:
    clean = commit_run(tmp_path / "runs", "clean", "c00", 1000, 0.5, seed=1)
    dirty = commit_run(tmp_path / "runs", "dirty", "c00", 1000, 0.6, seed=2, dirty=True)
    (only,) = history_of(imported(tmp_path, [clean, dirty])).series
    assert [point.label for point in only.points] == ["c00", "c00+dirty"]


def test_latency_and_tflops_are_there_on_request(tmp_path: Path) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5, 0.5]))
    latency = history_of(directory, "latency")
    assert {s.impl for s in latency.series} == {"naive", PLUGIN}  # the baseline has a latency series
    tflops = history_of(directory, "tflops")
    assert all(point.value > 0 for s in tflops.series for point in s.points)
    with pytest.raises(Exception, match="--metric: unknown metric 'speed'"):
        series.metric_named("speed")


def test_the_gate_fails_on_a_regression_in_the_newest_point_only(tmp_path: Path) -> None:
    steady = timeline(tmp_path / "runs", [0.5] * 5)
    directory = imported(tmp_path, steady)
    (result,) = gate.gate(history_of(directory), threshold=0.10)
    assert result.change is Change.SAME and not result.regression
    slow = commit_run(tmp_path / "runs", "slow", "c09", 2000, 0.65, seed=99)
    add_run(directory, slow)
    (result,) = gate.gate(history_of(directory), threshold=0.10)
    assert result.regression and result.newest.commit == "c09"
    assert result.size == pytest.approx(1.3, rel=0.03)
    message = result.message(0.10)
    assert "my_attention" in message and "c09" in message and "1.3" in message


def test_the_gate_does_not_fail_below_its_threshold_or_on_a_young_series(tmp_path: Path) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5] * 4 + [0.52]))
    (result,) = gate.gate(history_of(directory), threshold=0.10)
    assert not result.regression  # 4 % slower: under the 10 % threshold
    young = imported(tmp_path / "young", timeline(tmp_path / "young-runs", [0.5, 0.9]))
    (result,) = gate.gate(history_of(young), threshold=0.10)
    assert result.change is None and not result.regression and "not gated" in result.message(0.10)


def test_history_cli_imports_shows_and_gates(tmp_path: Path) -> None:
    folders = timeline(tmp_path / "runs", [0.5, 0.5, 0.5, 0.5, 0.7])
    directory = tmp_path / "history"
    args = [arg for folder in folders for arg in ("--import", str(folder))]
    done = RUNNER.invoke(app, ["history", str(directory), *args, "--gate", "--format", "json"])
    assert done.exit_code == 1, done.output
    data = json.loads(done.stdout)
    assert data["series"][0]["steps"] and data["gate"][0]["regression"] is True
    assert "regression:" in done.stderr and "c04" in done.stderr
    again = RUNNER.invoke(app, ["history", str(directory), "--import", str(folders[0])])
    assert again.exit_code == 0 and "0 rows" in again.stderr  # a run is kept once
    markdown = RUNNER.invoke(app, ["history", str(directory), "--format", "markdown", "--report", str(tmp_path / "r")])
    assert markdown.exit_code == 0 and "| commit |" in markdown.stdout and "c03..c04" in markdown.stdout
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Timeline" in html and "data:image/png;base64" in html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metric", "speed"], "--metric: unknown metric"),
        (["--format", "yaml"], "--format: 'yaml'"),
        (["--threshold", "lots"], "--threshold: 'lots'"),
        (["--impl", "my_atention", "--gate"], "--impl: 'my_atention' is not in this history (it has my_attention,"),
        (["--case", "n=1 h=1", "--gate"], "--case: 'n=1 h=1' is no case id or label"),
        (["--impl", "naive", "--gate"], "--case/--impl: no ratio series has --impl 'naive' (the baseline has"),
    ],
)
def test_history_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5]))
    done = RUNNER.invoke(app, ["history", str(directory), *args])
    assert done.exit_code == 2 and message in done.stderr and "Traceback" not in done.output


def test_history_takes_the_one_format_vocabulary(tmp_path: Path) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5, 0.5]))
    short, long = (RUNNER.invoke(app, ["history", str(directory), "--format", name]) for name in ("md", "markdown"))
    assert short.exit_code == long.exit_code == 0 and short.stdout == long.stdout and "| commit |" in short.stdout


def test_history_cli_refuses_a_bad_option_before_import_writes_anything(tmp_path: Path) -> None:
    (folder,) = timeline(tmp_path / "runs", [0.5])
    done = RUNNER.invoke(app, ["history", str(tmp_path / "h"), "--import", str(folder), "--metric", "speed"])
    assert done.exit_code == 2 and not (tmp_path / "h").exists()


def test_an_empty_timeline_and_a_gate_that_judged_nothing_say_so(tmp_path: Path) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5, 0.5, 0.5, 0.5]))  # CPU rows: no energy
    done = RUNNER.invoke(app, ["history", str(directory), "--metric", "energy", "--gate"])
    assert done.exit_code == 0, done.output
    assert "no energy series" in done.stderr and "energy_per_call_j" in done.stderr and "NVML" in done.stderr
    assert "gate: no series to judge" in done.stderr
    ratio = RUNNER.invoke(app, ["history", str(directory), "--gate"])
    assert ratio.exit_code == 0 and "no ratio series" not in ratio.stderr and "no series to judge" not in ratio.stderr


def test_history_cli_import_with_a_baseline_the_run_lacks_is_one_line(tmp_path: Path) -> None:
    (folder,) = timeline(tmp_path / "runs", [0.5])
    done = RUNNER.invoke(app, ["history", str(tmp_path / "h"), "--import", str(folder), "--baseline", "fused"])
    assert done.exit_code == 2 and "--baseline: 'fused' is not in run" in done.stderr


def test_run_history_falls_back_when_the_runs_default_baseline_is_not_in_its_config(tmp_path: Path) -> None:
    """`run --history` passes run's --baseline (naive by default) even for a config without it: rows still land."""
    (folder,) = timeline(tmp_path / "runs", [0.5])
    with pytest.raises(InputError, match="--baseline: 'fused'"):
        add_run(tmp_path / "h", folder, "fused")  # a user's --import --baseline: refused
    _, added = add_run(tmp_path / "h", folder, "fused", strict_baseline=False)
    assert added > 0 and set(store.read(tmp_path / "h")[0]["baseline"]) == {"naive"}


def test_ratios_to_another_baseline_are_another_series_not_a_step(tmp_path: Path) -> None:
    """The plugin at 0.5× naive = 1.0× fused: runs imported with either baseline must not form one series."""
    folders = [
        commit_run(tmp_path / "runs", f"r{i}", f"c{i:02d}", 1000 + i, 0.5, seed=i, with_fused=True) for i in range(8)
    ]
    for index, folder in enumerate(folders):
        add_run(tmp_path / "h", folder, "naive" if index < 4 else "fused")
    plugin = [one for one in history_of(tmp_path / "h").series if one.impl == PLUGIN]
    assert sorted(one.baseline for one in plugin) == ["fused", "naive"]
    assert all(len(one.points) == 4 and not one.steps for one in plugin)
    assert {"÷ fused" in one.name for one in plugin} == {True, False}  # the default baseline is not named


def test_a_store_that_is_not_a_database_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "history.sqlite").write_text("not a database")
    done = RUNNER.invoke(app, ["history", str(tmp_path / "h")])
    assert done.exit_code == 2 and "history.sqlite" in done.stderr and "not a database" in done.stderr, done.output


def test_run_resume_refuses_history_rather_than_ignoring_it(tmp_path: Path) -> None:
    done = RUNNER.invoke(app, ["run", "--resume", "latest", "--out", str(tmp_path), "--history", str(tmp_path / "h")])
    assert done.exit_code == 2 and "drop --history" in done.stderr and not (tmp_path / "h").exists()


def test_history_cli_without_a_store_is_one_line(tmp_path: Path) -> None:
    done = RUNNER.invoke(app, ["history", str(tmp_path / "none")])
    assert done.exit_code == 2 and "no store in" in done.stderr


def test_provenance_is_the_plugin_repositorys_commit_and_marks_a_dirty_tree(tmp_path: Path) -> None:
    repo = tmp_path / "plugin"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "my_plugin.py").write_text("x = 1\n")
    git(repo, "add", "my_plugin.py")
    git(repo, "commit", "-qm", "one")
    version = repository_version(repo / "my_plugin.py")
    assert version["commit"] == git(repo, "rev-parse", "HEAD") and version["dirty"] is False
    assert version["repo"] == str(repo.resolve()) and isinstance(version["commit_time"], int)
    (repo / "untracked.txt").write_text("scratch")
    assert repository_version(repo / "my_plugin.py")["dirty"] is False  # untracked files do not change the code
    (repo / "my_plugin.py").write_text("x = 2\n")
    assert repository_version(repo / "my_plugin.py")["dirty"] is True
    outside = tmp_path / "loose"
    outside.mkdir()
    assert repository_version(outside)["commit"] is None
    (repo / ".gitignore").write_text(".venv/\n")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "installed.py").write_text("x = 3\n")  # an installed package inside the project's venv
    (repo / "new_plugin.py").write_text("x = 4\n")  # never committed
    for untracked in (repo / ".venv" / "installed.py", repo / "new_plugin.py"):
        assert repository_version(untracked)["commit"] is None, untracked  # the repo's commit is not its code


def test_a_configs_history_folder_is_relative_to_the_config_file(tiny_config_data: dict) -> None:
    config = parse_config({**tiny_config_data, "history": "hist"}, "/somewhere/configs/tiny.yaml")
    assert Path(config.history or "") == Path("/somewhere/configs/hist")
    absolute = parse_config({**tiny_config_data, "history": "/ci/hist"}, "/somewhere/configs/tiny.yaml")
    assert absolute.history == "/ci/hist"


def test_built_in_rows_carry_this_projects_repository() -> None:
    if not (Path(__file__).resolve().parents[1] / ".git").exists():
        pytest.skip("this checkout is not a git repository (a source archive)")
    versions = code_versions([get_spec("naive")])
    assert Path(versions["naive"]["repo"]) == Path(__file__).resolve().parents[1]
    assert len(versions["naive"]["commit"]) == 40


@pytest.mark.usefixtures("registry_snapshot")
def test_run_with_history_appends_its_rows_with_the_plugins_commit(
    tmp_path: Path, tiny_config_data: dict, fixed_peaks: object
) -> None:
    repo = tmp_path / "plugin"
    repo.mkdir()
    git(repo, "init", "-q")
    source = Path(__file__).resolve().parents[1] / "docs" / "examples" / "my_attention.py"
    (repo / "my_attention.py").write_text(source.read_text())
    git(repo, "add", "my_attention.py")
    git(repo, "commit", "-qm", "plugin")
    config = tmp_path / "tiny.yaml"
    config.write_text(json.dumps({**tiny_config_data, "implementations": ["naive"], "history": str(tmp_path / "h")}))
    done = RUNNER.invoke(app, ["run", str(config), "--plugin", str(repo / "my_attention.py"), "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "history: 2 rows added" in done.output
    _, rows = store.read(tmp_path / "h")
    commits = dict(zip(rows["impl"], rows["commit"], strict=True))
    assert commits[PLUGIN] == git(repo, "rev-parse", "HEAD")  # the plugin's repository, not this project's
    assert commits["naive"] != commits[PLUGIN]


def test_a_runs_report_gets_the_timeline_of_its_own_series(tmp_path: Path) -> None:
    folders = timeline(tmp_path / "runs", [0.5, 0.5, 0.5, 0.7])
    directory = imported(tmp_path, folders)
    out = tmp_path / "report"
    args = ["report", str(folders[-1]), "--history", str(directory), "--format", "md", "--out", str(out)]
    done = RUNNER.invoke(app, args)
    assert done.exit_code == 0, done.output
    text = (out / "report.md").read_text()
    assert "## History" in text and "history_timeline.png" in text and "c02..c03" in text
    assert (out / "report_plots" / "history_timeline.png").stat().st_size > 1000


def test_the_gate_keeps_failing_on_a_young_slower_level_until_it_is_the_reference(tmp_path: Path) -> None:
    folders = timeline(tmp_path / "runs", [0.5] * 5 + [0.65, 0.65])
    (result,) = gate.gate(history_of(imported(tmp_path, folders)), threshold=0.10)
    assert result.regression and result.since.commit == "c05" and result.newest.commit == "c06"
    assert "the level since then" in result.message(0.10)
    settled = timeline(tmp_path / "settled-runs", [0.5] * 5 + [0.65] * 4)
    (result,) = gate.gate(history_of(imported(tmp_path / "settled", settled)), threshold=0.10)
    assert not result.regression  # three points on the new level: it is the reference now


def test_the_gate_verdict_is_the_one_rule_on_its_interval_and_spread(tmp_path: Path) -> None:
    from mhabench.analysis.verdict import judge_change

    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5, 0.51, 0.49, 0.5, 0.56]))
    for threshold in (0.02, 0.05, 0.10, 0.2):
        (result,) = gate.gate(history_of(directory), threshold=threshold)
        assert result.change == judge_change(result.low, result.high, threshold, result.spread)


def test_the_recorded_h100_run_imports_with_its_gpu_fingerprint_and_commit(tmp_path: Path, h100_run: Path) -> None:
    """A run written before ``code`` existed: keyed by its environment's commit and its H100 fingerprint."""
    run_id, added = add_run(tmp_path / "history", h100_run)
    assert run_id == h100_run.name and added > 0
    found = history_of(tmp_path / "history")
    assert found.series and {s.fingerprint.device_name for s in found.series} == {"NVIDIA H100 80GB HBM3"}
    assert {s.fingerprint.torch for s in found.series} == {"2.11.0+cu130"}
    assert {s.fingerprint.driver_version for s in found.series} == {"580.159.04"}
    assert {point.commit for s in found.series for point in s.points} == {"f672fbe5546a595976abba27c1b5d093e5a43b50"}
    assert all(0 < point.low <= point.value <= point.high for s in found.series for point in s.points)
    assert "naive" not in {s.impl for s in found.series}  # the baseline's ratio to itself is no series


def test_a_runs_report_says_so_when_the_history_has_none_of_its_series(tmp_path: Path) -> None:
    directory = imported(tmp_path, timeline(tmp_path / "runs", [0.5]))
    (other,) = timeline(tmp_path / "other", [0.5], torch="2.11.0")
    other_rows = other / "results.csv"
    other_rows.write_text(other_rows.read_text().replace("my_attention", "my_other"))
    (other / "results.parquet").unlink()
    done = RUNNER.invoke(
        app, ["report", str(other), "--history", str(directory), "--format", "md", "--out", str(tmp_path / "r")]
    )
    assert done.exit_code == 0, done.output
    assert "holds no series of this run's cases" in (tmp_path / "r" / "report.md").read_text()
