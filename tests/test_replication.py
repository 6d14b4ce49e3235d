"""Replicates: the interval across processes on synthetic data whose true ratio is known, the pick across
replicates, the case order of each replicate, and ``run --replicates`` end to end."""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from said_from_record import statement
from scipy import stats as scipy_stats
from synthetic_runs import rounds, row
from typer.testing import CliRunner

from mhabench.analysis.advice.answers import answer, pick_replicated
from mhabench.analysis.advice.cases import MeasuredCase, cases_of
from mhabench.analysis.advice.pick import CANNOT_TELL, TIED, WINNER
from mhabench.analysis.estimate import across_processes, between_process_range, samples_of, t_interval
from mhabench.analysis.stats import CONFIDENCE_LEVEL, paired_ratio
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.results.manifest import Manifest
from mhabench.results.store import Run, load_run, typed_rows
from mhabench.run.replicates import (
    REPLICATES_FOLDER,
    Replicate,
    ReplicateProgress,
    case_order,
    check_replicable,
    parse_replicate,
)
from mhabench.views import wording
from mhabench.views.progress import replicate_line
from mhabench.views.wording import sentence as text_of

TRUE_RATIO = 1.05


def synthetic_replicates(
    rng: np.random.Generator, count: int, between: float = 0.05, within: float = 0.02, rounds_each: int = 20
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` processes of paired rounds: each process shifts the true ratio by its own log-normal offset
    (``between``), and every round adds a shared machine-speed factor and its own noise (``within``)."""
    found = []
    for _ in range(count):
        offset = math.exp(rng.normal(0, between))
        speed = np.exp(rng.normal(0, 0.3, rounds_each))
        base = speed * np.exp(rng.normal(0, within, rounds_each))
        found.append((TRUE_RATIO * offset * speed * np.exp(rng.normal(0, within, rounds_each)), base))
    return found


def coverage(count: int, draws: int = 300) -> tuple[float, float]:
    """How often the interval across ``count`` replicates, and one process's paired interval over all their
    rounds pooled, contain the true ratio."""
    rng = np.random.default_rng(7)
    across = pooled = 0
    for _ in range(draws):
        processes = synthetic_replicates(rng, count)
        combined = across_processes([paired_ratio(cand, base).ratio for cand, base in processes])
        one = paired_ratio(np.concatenate([c for c, _ in processes]), np.concatenate([b for _, b in processes]))
        across += combined.ci_low <= TRUE_RATIO <= combined.ci_high
        pooled += one.ci_low <= TRUE_RATIO <= one.ci_high
    return across / draws, pooled / draws


@pytest.mark.parametrize("count", [3, 5])
def test_the_interval_across_replicates_covers_the_true_ratio_where_one_process_does_not(count: int) -> None:
    across, pooled = coverage(count)
    assert across >= 0.9  # nominal 95 %
    assert pooled <= 0.6  # within-process intervals miss the between-process offset


def test_the_interval_is_the_t_interval_of_the_log_ratios() -> None:
    ratios = [1.1, 1.2, 1.3]
    logs = np.log(ratios)
    half = 4.302652729911275 * logs.std(ddof=1) / math.sqrt(3)  # t(0.975, 2)
    found = across_processes(ratios)
    assert found.ratio == pytest.approx(math.exp(logs.mean()))
    assert (found.ci_low, found.ci_high) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))


def test_the_t_interval_is_scipys_to_the_last_bit() -> None:
    """``t_interval`` repeats scipy's operations without its dispatch: the same floats, so no stored answer moves."""
    rng = np.random.default_rng(3)
    for size in range(2, 12):
        for scale in (1e-9, 0.01, 0.3, 5.0):
            for _ in range(40):
                values = rng.normal(rng.normal(0, 1), scale, size)
                expected = scipy_stats.ttest_1samp(values, 0.0).confidence_interval(CONFIDENCE_LEVEL)
                assert t_interval(values) == (float(expected.low), float(expected.high)), (size, scale, values)


def test_without_between_process_spread_the_interval_shrinks_with_agreeing_replicates() -> None:
    assert across_processes([1.2, 1.2, 1.2]) == pytest.approx(across_processes([1.2, 1.2]))
    wide, narrow = across_processes([1.0, 1.4, 1.2]), across_processes([1.19, 1.21, 1.2])
    assert wide.ci_high - wide.ci_low > 10 * (narrow.ci_high - narrow.ci_low)


def test_one_replicate_has_no_interval_and_non_finite_ratios_are_left_out() -> None:
    one = across_processes([1.3, math.nan, -1.0])
    assert one.ratio == pytest.approx(1.3) and math.isnan(one.ci_low) and math.isnan(one.ci_high)
    assert math.isnan(across_processes([]).ratio)
    assert between_process_range([1.0, 1.1, 1.05]) == pytest.approx(0.1)
    assert math.isnan(between_process_range([1.0]))


# --- the pick across replicates ----------------------------------------------------------------------


def replicated_case(leads: list[dict[str, float]], noise: float = 0.005) -> MeasuredCase:
    """One case measured in ``len(leads)`` processes; replicate i's implementations have medians ``leads[i]``."""
    records = []
    for index, medians in enumerate(leads):
        times = rounds(medians, count=20, noise=noise, seed=index)
        records += [row(impl, times[impl], repeat=index) for impl in medians]
    (case,) = cases_of("run", pd.DataFrame(records), across_processes=True)
    return case


def test_a_lead_that_holds_in_every_process_is_a_winner_across_them() -> None:
    found = pick_replicated(replicated_case([{"naive": 1.5, "fused": 1.0}] * 2 + [{"naive": 1.45, "fused": 1.0}]))
    assert (found.verdict, found.impls, found.runner_up) == (WINNER, ("fused",), "naive")
    assert found.estimate is not None and 1.4 < found.estimate.ci_low < found.estimate.ratio < 1.55
    assert "(across 3 replicates, each paired over its rounds)" in text_of(statement(found))


def test_winners_that_flip_between_processes_are_tied_not_cannot_tell() -> None:
    flips = [{"naive": 1.06, "fused": 1.0}, {"naive": 1.0, "fused": 1.05}, {"naive": 1.04, "fused": 1.0}]
    case = replicated_case(flips)
    found = pick_replicated(case)
    assert found.verdict == TIED and set(found.impls) == {"naive", "fused"}
    # each process alone was sure of its own winner: the within-process interval excludes 1 in every one
    for repeat in case.repeats:
        by_impl = {r["impl"]: samples_of(r) for r in repeat}
        one = paired_ratio(by_impl["naive"], by_impl["fused"])
        assert not one.ci_low <= 1 <= one.ci_high


def test_a_row_ok_in_only_one_replicate_cannot_be_told() -> None:
    case = replicated_case([{"naive": 1.5, "fused": 1.0}, {"naive": 1.5, "fused": 1.0}])
    broken = list(case.repeats[1])
    broken[[r["impl"] for r in broken].index("naive")] = row("naive", [], status="error", repeat=1)
    found = pick_replicated(dataclasses.replace(case, repeats=(case.repeats[0], tuple(broken))))
    assert found.verdict == CANNOT_TELL and found.impls == ("fused",)
    assert "naive" in wording.reason(found.reason_code, found.reason_figures, found.impls[0])


def test_answers_read_a_run_across_replicates_only_when_its_manifest_says_so() -> None:
    flips = [{"naive": 1.06, "fused": 1.0}, {"naive": 1.0, "fused": 1.05}, {"naive": 1.04, "fused": 1.0}]
    frame = typed_rows(pd.DataFrame([r for index, case_rows in enumerate(flips) for r in _rows(case_rows, index)]))
    replicated = answer(Run(Path("r"), Manifest.model_validate({"run_id": "r", "replicates": 3}), frame))
    repeated = answer(Run(Path("r"), Manifest.model_validate({"run_id": "r", "repeats": 3}), frame))
    (case_id,) = replicated.picks
    assert replicated.picks[case_id].verdict == TIED
    assert repeated.picks[case_id].verdict == CANNOT_TELL  # --repeat passes of one process that disagree
    assert Manifest.model_validate({"replicates": 3}).replicated
    assert not Manifest.model_validate({"replicates": 1}).replicated and not Manifest().replicated


def _rows(medians: dict[str, float], index: int) -> list[dict[str, Any]]:
    times = rounds(medians, count=20, noise=0.005, seed=index)
    return [row(impl, times[impl], repeat=index) for impl in medians]


# --- the replicates of a run --------------------------------------------------------------------------


def test_replicate_zero_keeps_the_config_order_and_the_others_are_seeded_permutations() -> None:
    cases: list[Any] = list(range(8))
    assert case_order(cases, 0) == cases
    assert sorted(case_order(cases, 1)) == cases and case_order(cases, 1) != cases
    assert case_order(cases, 1) == case_order(cases, 1) and case_order(cases, 1) != case_order(cases, 2)


def test_replicate_options_are_checked_in_one_line() -> None:
    assert parse_replicate("1/3") == Replicate(1, 3) and str(Replicate(1, 3)) == "1/3"
    for bad in ("3/3", "x/2", "1"):
        with pytest.raises(InputError, match="--replicate"):
            parse_replicate(bad)
    check_replicable(1, 4, object(), object())  # one replicate: any launch
    for repeat, shard, launch, said in ((2, None, None, "--repeat"), (1, 1, None, "--shard"), (1, None, 1, "torchrun")):
        with pytest.raises(InputError, match=f"{said}: the config runs 3 replicates .*pass --replicates 1"):
            check_replicable(3, repeat, shard, launch)


TINY = """
name: tiny
implementations: [naive, fused]
timing: {min_run_time_s: 0.01, max_run_time_s: 0.05, min_samples: 6, warmup_max_s: 0.01}
scenarios:
  - {batch: 1, seq_len: [16, 32, 48], d_model: 32, heads: 2}
"""


def test_a_replicated_runs_progress_names_the_processes_and_the_one_folder_that_holds_them() -> None:
    folder = Path("results/20261129T061756Z-default")
    assert replicate_line(ReplicateProgress(0, 3, folder)) == (
        "3 processes, one after another, each a replicate of the config; their rows go to "
        "results/20261129T061756Z-default"
    )
    assert replicate_line(ReplicateProgress(2, 3, folder)) == "process 2/3 done: repeat 1 of 20261129T061756Z-default"


FORKED = "a replicate forked"
FORK_SPY = f"""
import sys
from mhabench.run import replicates

forked = replicates._forked


def spy(*args):
    print({FORKED!r}, flush=True)
    return forked(*args)


replicates._forked = spy
from mhabench.cli import main

main()
"""
"""``mhabench`` in a new interpreter, saying each time it forks a replicate."""


@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh-interpreter"])
def test_run_replicates_measures_each_process_and_merges_them_into_one_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fork: bool
) -> None:
    """On the CPU a replicate is a fork of the command's process (no imports again); on CUDA, or where there is no
    fork, a fresh interpreter: both measure and merge alike, and each records the command it ran. The forked case
    runs the command as a user does, in a new interpreter that has run no torch op: a fork of this test process,
    whose OpenMP pool other tests have started, could hang in it."""
    from mhabench.run import replicates as replicated
    from mhabench.run import runner

    assert replicated.can_fork(torch.device("cpu")) == ("fork" in multiprocessing.get_all_start_methods())
    assert not replicated.can_fork(torch.device("cuda"))
    if fork and not replicated.can_fork(torch.device("cpu")):
        pytest.skip("no fork on this platform")
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    command = ["run", str(config), "--replicates", "2", "--out", str(tmp_path / "out")]
    if fork:
        driver = tmp_path / "driver.py"
        driver.write_text(FORK_SPY)
        done = subprocess.run([sys.executable, str(driver), *command], capture_output=True, text=True, check=False)
        exit_code, output = done.returncode, done.stdout + done.stderr
    else:
        monkeypatch.setattr(replicated, "can_fork", lambda device: False)
        monkeypatch.setattr(runner, "_measured_here", [])  # as a fresh `mhabench run`: nothing measured before
        result = CliRunner().invoke(app, command)
        exit_code, output = result.exit_code, result.output
    assert exit_code == 0, output
    assert (FORKED in output) == fork
    said = " ".join(output.split())  # the title wraps to the table's width
    assert "speedup vs naive, across processes" in said  # the run's table: read across the processes
    (run_dir,) = (tmp_path / "out").iterdir()
    assert json.loads((run_dir / "answers.json").read_text())["replicated"] is True
    lines = output.splitlines()
    assert any(line.startswith(f"process 1/2 done: repeat 0 of {run_dir.name} (") for line in lines)
    assert any(line.startswith(f"process 2/2 done: repeat 1 of {run_dir.name} (") for line in lines)
    # every run folder the progress names is the one on disk: the processes' own folders were merged and removed
    assert set(re.findall(r"\d{8}T\d{6}Z-[\w.-]+", output)) == {run_dir.name}
    run = load_run(run_dir)
    assert not (run_dir / REPLICATES_FOLDER).exists()
    assert (
        run.manifest.as_dict()["replicates"] == 2
        and run.manifest.as_dict()["repeats"] == 2
        and run.manifest.as_dict()["status"] == "complete"
    )
    sources = run.manifest.as_dict()["replicated_from"]
    assert [s["replicate"] for s in sources] == [0, 1] and len({s["run_id"] for s in sources}) == 2
    assert set(run.frame["repeat"]) == {0, 1} and set(run.frame["run_id"]) == {run_dir.name}
    assert len(run.frame) == 2 * 3 * 2 and (run.frame["status"] == "ok").all()
    orders = [list(dict.fromkeys(run.frame[run.frame["repeat"] == r]["case_id"])) for r in (0, 1)]
    assert sorted(orders[0]) == sorted(orders[1])
    assert json.loads((run_dir / "manifest.json").read_text())["config"]["replicates"] == 1  # what each process ran


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--replicates", "0"], "--replicates: must be between 1 and 100"),
        (["--replicates", "2", "--repeat", "2"], "--repeat"),
    ],
)
def test_bad_replicate_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY)
    result = CliRunner().invoke(app, ["run", str(config), *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output


def test_a_failed_replicate_ends_the_run_with_the_finished_rows_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replicate 0 finishes, replicate 1 fails: the run folder holds replicate 0's rows, says failed, and the
    error names the failing replicate; replicate 2 never starts."""
    from synthetic_runs import write_run

    from mhabench.run import replicates as replicated
    from mhabench.scenario.loading import parse_config

    started: list[int] = []

    def fake_child(
        config_file: Path,
        out_root: Path,
        replicate: Replicate,
        plugin_files: Any,
        roofline: Any = None,
        fork: Any = None,
    ) -> Any:
        started.append(replicate.index)
        if replicate.index == 0:
            return write_run(out_root, "first", [row("naive", [1.0] * 6), row("fused", [0.5] * 6)]), None
        return None, f"replicate {replicate} exited with status 1 (its log: …boom)"

    monkeypatch.setattr(replicated, "_run_child", fake_child)
    config = parse_config(
        {"name": "tiny", "replicates": 3, "scenarios": [{"seq_len": 16, "d_model": 32, "heads": 2}]}, "x"
    )
    with pytest.raises(
        replicated.ReplicateFailedError, match=r"replicate 1/3 exited with status 1.*rows of 1 replicate"
    ):
        replicated.run_replicated(config, tmp_path / "out", ["mhabench", "run"])
    assert started == [0, 1]
    (run_dir,) = (tmp_path / "out").iterdir()
    run = load_run(run_dir)
    assert run.manifest.as_dict()["status"] == "failed" and len(run.frame) == 2 and set(run.frame["repeat"]) == {0}
    assert [entry["run_id"] for entry in run.manifest.as_dict()["replicated_from"]] == ["first"]


def test_a_tied_row_that_sorts_behind_a_clearly_slower_one_is_the_runner_up_quoted() -> None:
    """per_head is 4.5× slower than fused in one process and close to it in two: it sorts behind naive (steadily
    1.8× slower) by its geometric-mean median, yet it is the tied row, so the sentence quotes its lead."""
    case = replicated_case(
        [
            {"naive": 1.8, "fused": 1.0, "per_head": 4.5},
            {"naive": 1.8, "fused": 1.0, "per_head": 1.05},
            {"naive": 1.85, "fused": 1.0, "per_head": 1.5},
        ]
    )
    found = pick_replicated(case)
    assert found.verdict == TIED and set(found.impls) == {"fused", "per_head"} and found.runner_up == "per_head"
    assert found.estimate is not None and found.estimate.ci_low <= 1
    assert "over `per_head`" in text_of(statement(found)) and "the interval includes 1" in text_of(statement(found))


def test_the_pick_is_the_implementation_the_paired_ratios_make_fastest_not_the_one_with_the_lowest_medians() -> None:
    """Rounds of three kinds, a third each: (A 1, B 0.9), (A 1, B 5), (A 10, B 5). A's median (1) is below B's (5),
    yet B is faster in two rounds of three (the median paired ratio B/A is 0.9), in every process. The pick must be
    B, clearly ahead, not a "tie" whose printed interval says the runner-up is the faster one."""
    rng = np.random.default_rng(7)
    records = []
    for replicate in range(3):
        jitter = lambda: float(np.exp(rng.normal(0, 0.002)))  # noqa: E731
        a = [ms * jitter() for ms in [1.0, 1.0, 10.0] * 7]
        b = [ms * jitter() for ms in [0.9, 5.0, 5.0] * 7]
        records += [row("A", a, repeat=replicate), row("B", b, repeat=replicate)]
    (case,) = cases_of("run", pd.DataFrame(records))
    found = pick_replicated(case)
    assert (found.verdict, found.impls, found.runner_up) == (WINNER, ("B",), "A")
    assert found.estimate is not None and 1.0 < found.estimate.ci_low <= found.estimate.ratio < 1.2


def test_a_process_that_measured_starts_fresh_interpreters_not_forks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork after torch ran (a first config measured in this process) could hang in OpenMP's thread pool."""
    from mhabench import cli_run
    from mhabench.run import replicates as replicated
    from mhabench.run import runner
    from mhabench.scenario.loading import parse_config

    given: list[object] = []
    monkeypatch.setattr(replicated, "run_replicated", lambda *args: given.append(args[-1]) or None)
    monkeypatch.setattr(cli_run, "print_run", lambda result, baseline, wide=False: None)
    config = parse_config({"name": "t", "replicates": 2, "scenarios": [{"seq_len": 8, "d_model": 16, "heads": 2}]}, "x")
    for measured, entry in (([], cli_run.replicate_main), ([True], None)):
        monkeypatch.setattr(runner, "_measured_here", measured)
        cli_run.run_replicate_or_replicated(config, tmp_path, None, 1, None, "naive")
        assert given.pop() is entry
