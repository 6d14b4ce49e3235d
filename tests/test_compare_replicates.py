"""``compare`` of two replicated runs reads each row across the processes of both runs (not replicate i with i),
on synthetic runs whose answer is known: a real 20 % change is found, a between-process wobble is never called."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
from synthetic_runs import write_replicated_run
from typer.testing import CliRunner

from mhabench.analysis.compare import compare_runs
from mhabench.analysis.estimate import two_sided_across as across_processes
from mhabench.analysis.pooled_change import measured_spread
from mhabench.analysis.verdict import Change
from mhabench.cli import app
from mhabench.results.store import load_run

SEQ_LENS = (64, 128, 256, 512, 1024, 2048)
FAST_MS, SLOW_MS = 1.0, 2.0


def processes(
    rng: np.random.Generator, count: int, between: float, fused_factor: float = 1.0
) -> list[dict[str, float]]:
    """``count`` processes: each moves every implementation by its own log-normal factor (``between``) and each
    implementation by a smaller one of its own; ``fused_factor`` is the real change of ``fused``."""
    found = []
    for _ in range(count):
        machine = math.exp(rng.normal(0, between))
        own = np.exp(rng.normal(0, between / 2, 2))
        found.append({"naive": SLOW_MS * machine * own[0], "fused": FAST_MS * fused_factor * machine * own[1]})
    return found


def pair(tmp_path: Path, between: float, fused_factor: float, seed: int, count: int = 3) -> tuple[Path, Path]:
    """A base and a candidate run of ``count`` replicates each, on one machine whose processes move by ``between``."""
    rng = np.random.default_rng(seed)
    root = tmp_path / "runs"
    base = write_replicated_run(root, "base", processes(rng, count, between), seq_lens=SEQ_LENS, drift=0.02, seed=1)
    candidate_processes = processes(rng, count, between, fused_factor)
    candidate = write_replicated_run(root, "cand", candidate_processes, seq_lens=SEQ_LENS, drift=0.02, seed=2)
    return base, candidate


def verdicts(base: Path, candidate: Path, spread: float = 0.0) -> dict[str, set[str]]:
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05, between_process_spread=spread)
    found: dict[str, set[str]] = {}
    for impl, verdict in zip(comparison.rows["impl"], comparison.rows["verdict"], strict=True):
        found.setdefault(impl, set()).add(verdict)
    return found


def one_process_each(run_dir: Path) -> Path:
    """The same rows read as ``--repeat N`` of one process: compare then pairs repeat i with repeat i."""
    manifest = run_dir / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "replicates": None}))
    return run_dir


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_real_20_percent_change_is_found_across_processes(tmp_path: Path, seed: int) -> None:
    base, candidate = pair(tmp_path, between=0.02, fused_factor=1.2, seed=seed)
    found = verdicts(base, candidate)
    assert found["fused"] == {Change.SLOWER.value}
    assert Change.SLOWER.value not in found["naive"] and Change.FASTER.value not in found["naive"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_between_process_wobble_is_never_called_but_replicate_i_with_i_calls_it(tmp_path: Path, seed: int) -> None:
    base, candidate = pair(tmp_path, between=0.08, fused_factor=1.0, seed=seed)
    pooled = set().union(*verdicts(base, candidate).values())
    assert not pooled & {Change.FASTER.value, Change.SLOWER.value}
    # the same rows read replicate by replicate: each pair of processes is sure of a difference that is not there
    paired = set().union(*verdicts(one_process_each(base), one_process_each(candidate)).values())
    assert paired & {Change.FASTER.value, Change.SLOWER.value}


def test_the_interval_is_the_pooled_variance_t_interval_of_the_log_medians() -> None:
    base, candidate = [1.0, 1.1, 0.95], [1.2, 1.25, 1.3]
    found, p_value = across_processes(candidate, base)
    logs_c, logs_b = np.log(candidate), np.log(base)
    difference = logs_c.mean() - logs_b.mean()
    pooled_sd = math.sqrt((logs_c.var(ddof=1) * 2 + logs_b.var(ddof=1) * 2) / 4)
    half = scipy.stats.t.ppf(0.975, 4) * pooled_sd * math.sqrt(1 / 3 + 1 / 3)
    assert (found.ratio, found.ci_low, found.ci_high) == pytest.approx(
        (math.exp(difference), math.exp(difference - half), math.exp(difference + half))
    )
    assert 0 < p_value < 0.05


def test_a_one_process_side_counts_and_too_few_processes_give_no_interval() -> None:
    one_side, _ = across_processes([1.2], [1.0, 1.05, 0.98])  # the spread comes from the three-process side
    assert math.isfinite(one_side.ci_low) and one_side.ci_low < 1.2 / 1.01 < one_side.ci_high
    two, p_value = across_processes([1.2], [1.0])  # one process a side: no spread to estimate
    assert two.ratio == pytest.approx(1.2) and math.isnan(two.ci_low) and math.isnan(p_value)
    assert math.isnan(across_processes([], [1.0, 1.1])[0].ratio)


def test_the_runs_own_spread_widens_every_interval(tmp_path: Path) -> None:
    base, candidate = pair(tmp_path, between=0.08, fused_factor=1.0, seed=0)
    comparison = compare_runs(load_run(base), load_run(candidate), 0.05)
    measured = measured_spread(load_run(base).frame, load_run(candidate).frame, ["case_id", "impl", "repeat"])
    assert 0.05 < measured < 0.5 and comparison.between_process_spread == pytest.approx(measured)
    calibrated = compare_runs(load_run(base), load_run(candidate), 0.05, between_process_spread=0.9)
    assert calibrated.between_process_spread == 0.9  # a larger calibrated spread is kept


def test_compare_on_the_command_line_says_how_many_processes_each_row_rests_on(tmp_path: Path) -> None:
    base, candidate = pair(tmp_path, between=0.02, fused_factor=1.2, seed=0)
    result = CliRunner().invoke(app, ["compare", str(base), str(candidate), "--process-spread", "0%"])
    assert result.exit_code == 0, result.output
    assert "across 3 vs 3 processes" in result.output and "intervals widened by the between-process" in result.output
    assert result.output.count("slower") >= len(SEQ_LENS)


def test_each_sides_figure_is_the_geometric_mean_of_its_processes_so_the_ratio_is_theirs(tmp_path: Path) -> None:
    base, candidate = pair(tmp_path, between=0.05, fused_factor=1.2, seed=3)
    rows = compare_runs(load_run(base), load_run(candidate), 0.05).rows
    assert rows["ratio"].to_numpy() == pytest.approx((rows["candidate_ms"] / rows["base_ms"]).to_numpy())
    base_rows = load_run(base).frame
    fused_64 = base_rows[(base_rows["impl"] == "fused") & (base_rows["seq_len"] == 64)]["latency_ms"]
    first = rows[(rows["impl"] == "fused") & (rows["case"].str.startswith("n=64 "))]["base_ms"]
    assert float(first.iloc[0]) == pytest.approx(float(np.exp(np.log(fused_64).mean())))
