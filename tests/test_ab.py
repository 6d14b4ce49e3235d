"""``mhabench ab``: two versions of one plugin file under two names, in the same rounds, in fresh processes."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from mhabench.analysis.ab import compare_versions, no_change_p
from mhabench.analysis.estimate import row_ratio, rows_ratio_by_process
from mhabench.analysis.stats import holm
from mhabench.analysis.two_run_gate import REGRESSION
from mhabench.analysis.verdict import Change
from mhabench.cli import app
from mhabench.impls.registry import build, get_spec
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN
from mhabench.results.store import load_run
from mhabench.run.ab import load_versions

PLUGIN = Path(__file__).resolve().parent.parent / "docs" / "findings" / "gate" / "my_fused.py"


def with_extra_rows(tmp_path: Path, fraction: float) -> Path:
    """A copy of the findings' plugin computing the scores of ``fraction`` of the query rows again: a regression of
    known work."""
    path = tmp_path / f"my_fused_x{fraction}.py"
    path.write_text(PLUGIN.read_text().replace("EXTRA_ROWS = 0.0\n", f"EXTRA_ROWS = {fraction}\n"), encoding="utf-8")
    return path


def test_one_file_loads_twice_under_two_names_and_both_compute_the_same(tmp_path: Path) -> None:
    versions = load_versions(PLUGIN, PLUGIN, tmp_path / "out")
    assert versions.pairs == (("my_fused", "my_fused@base", "my_fused@candidate"),)
    assert get_spec("my_fused@base").factory is not get_spec("my_fused@candidate").factory  # two modules
    weights = AttentionWeights.random(32)
    x = torch.randn(1, 8, 32, generator=torch.Generator().manual_seed(0))
    base, candidate = (build(name, weights, 4, PLAIN) for name in ("my_fused@base", "my_fused@candidate"))
    assert torch.equal(base(x), candidate(x))
    generated = sorted(path.name for path in (tmp_path / "out" / ".ab").glob("*/*.py"))
    assert generated == ["ab_base.py", "ab_candidate.py"]


def test_files_that_share_no_name_are_one_line(tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text(PLUGIN.read_text().replace('"my_fused"', '"their_fused"'), encoding="utf-8")
    result = CliRunner().invoke(app, ["ab", str(PLUGIN), str(other), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "register no implementation under the same name" in result.output and "their_fused" in result.output
    missing = CliRunner().invoke(app, ["ab", str(PLUGIN), str(tmp_path / "nope.py"), "--out", str(tmp_path / "o")])
    assert missing.exit_code == 2 and "no such plugin file" in missing.output


def test_processes_are_read_across_and_one_process_keeps_its_own_interval() -> None:
    def row(times_ms: list[float]) -> dict:
        return {"times_ms": times_ms, "rounds_id": "r", "status": "ok"}

    base = row([1.0] * 12)
    noisy = row([1.0 + 0.01 * (i % 5) for i in range(12)])
    one = rows_ratio_by_process({0: noisy}, {0: base})
    assert one == row_ratio(noisy, base) and one.has_interval  # one process: its own paired interval
    ratios = (1.10, 1.12, 1.08)
    pooled = rows_ratio_by_process({p: row([r] * 12) for p, r in enumerate(ratios)}, {p: base for p in range(3)})
    assert pooled.ratio == pytest.approx(math.exp(sum(math.log(r) for r in ratios) / 3))
    assert pooled.ci_low < pooled.ratio < pooled.ci_high and pooled.processes == 3
    assert rows_ratio_by_process({0: row([1.25] * 12)}, {0: base}).ratio == pytest.approx(1.25)  # candidate over base


def test_p_is_the_t_test_of_the_processes_log_ratios_against_no_change_holm_adjusted() -> None:
    steady = [1.30, 1.32, 1.29]
    assert no_change_p(steady) < 0.01
    mixed = [0.95, 1.06, 1.00]
    assert no_change_p(mixed) > 0.5
    assert math.isnan(no_change_p(steady[:1]))  # one process: nothing across processes to test
    assert math.isnan(no_change_p([steady[0], steady[0]]))  # no spread to test against
    case = {"scenario": "s", "seq_len": 64, "heads": 2, "d_model": 32, "batch": 1, "dtype": "float32"}
    frame = pd.DataFrame(
        [
            {
                **case,
                "case_id": case_id,
                "causal": False,
                "bias": False,
                "impl": impl,
                "repeat": repeat,
                "status": "ok",
                "rounds_id": f"r{repeat}",
                "times_ms": [slower * (1 + 0.01 * repeat)] * 8,  # the candidate 0 %, 1 %, 2 % slower by process
                "latency_ms": slower,
            }
            for case_id, factor in (("a", 1.3), ("b", 1.0))
            for repeat in range(3)
            for impl, slower in (("p@base", 1 / (1 + 0.01 * repeat)), ("p@candidate", factor))
        ]
    )
    rows = compare_versions(frame, [("p", "p@base", "p@candidate")], 0.05, ("a", "b")).rows
    assert list(rows["p_holm"]) == pytest.approx(holm(list(rows["p_value"])))
    assert rows["p_holm"].iloc[0] < 0.01 < rows["p_holm"].iloc[1]  # ×1.30 steady; ×1.00–1.02


def test_ab_end_to_end_times_both_versions_in_the_same_rounds_and_fails_on_counted_work(tmp_path: Path) -> None:
    config = tmp_path / "tiny.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "tiny-ab",
                "device": "cpu",
                "dtype": "float32",
                "threads": 1,
                "timing": {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 6, "warmup_max_s": 0.01},
                "scenarios": [{"name": "t", "batch": 1, "seq_len": 32, "d_model": 32, "heads": 2}],
            }
        )
    )
    candidate = with_extra_rows(tmp_path, 0.25)
    out = tmp_path / "out"
    args = ["ab", str(PLUGIN), str(candidate), str(config), "--replicates", "2", "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--fail-on-regression", "--output", str(tmp_path / "ab.json")])
    assert result.exit_code == REGRESSION, result.output
    assert "counted work risen past the threshold" in result.output
    run_dir = next(path.parent for path in out.glob("*/manifest.json"))
    run = load_run(run_dir)
    frame = run.frame
    assert set(frame["impl"]) == {"my_fused@base", "my_fused@candidate"}
    assert sorted(set(frame["repeat"])) == [0, 1]  # two fresh processes
    for _, process in frame.groupby("repeat"):
        assert process["rounds_id"].nunique() == 1  # both versions in the same rounds
    comparison = compare_versions(frame, [("my_fused", "my_fused@base", "my_fused@candidate")], 0.05, ("a", "b"))
    row = comparison.rows.iloc[0]
    flops = {change.column: change for change in row["work_changes"]}["measured_flops"]
    n, heads, head_dim = 32, 2, 16
    assert flops.candidate - flops.base == 2 * (n // 4) * n * head_dim * heads  # a quarter of q·kᵀ, counted exactly
    assert 0 <= row["p_holm"] <= 1  # two processes: a t test of their log ratios
    assert row["verdict"] in {verdict.value for verdict in Change}
