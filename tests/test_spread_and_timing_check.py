"""`mhabench spread` (run-to-run spread of speedups) and `mhabench check-timing` (our medians vs Timer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from synthetic_runs import row, write_run
from typer.testing import CliRunner

from mhabench.cli import app


def spread_run(root: Path, name: str, fused_ms: float) -> Path:
    """naive at 2 ms, fused at ``fused_ms``: each sample alike, so the speedup is exactly 2 / fused_ms."""
    return write_run(root, name, [row("naive", [2.0] * 5), row("fused", [fused_ms] * 5)])


def test_spread_over_three_runs_is_max_minus_min_over_median(tmp_path: Path) -> None:
    runs = [spread_run(tmp_path, f"r{i}", fused_ms) for i, fused_ms in enumerate((1.0, 0.8, 1.0))]
    result = CliRunner().invoke(app, ["spread", *map(str, runs)])
    assert result.exit_code == 0, result.output
    # speedups 2.00 / 2.50 / 2.00: (2.5 − 2) / 2 = 25 %; latency 1.0 / 0.8 / 1.0: 0.2 / 1.0 = 20 %
    assert "2.00 / 2.50 / 2.00" in result.output
    assert "25.0 %" in result.output and "20.0 %" in result.output


def test_spread_refuses_runs_of_different_pairs(tmp_path: Path) -> None:
    first = spread_run(tmp_path, "a", 1.0)
    other = write_run(tmp_path, "b", [row("naive", [2.0] * 5), row("per_head", [3.0] * 5)])
    result = CliRunner().invoke(app, ["spread", str(first), str(other)])
    assert result.exit_code == 2 and "other (case, implementation) pairs" in result.output


def test_one_repeated_run_is_its_own_repeats(tmp_path: Path) -> None:
    rows = [
        row(impl, [2.0 if impl == "naive" else ms] * 5, repeat=r)
        for r, ms in enumerate((1.0, 1.0, 0.5))
        for impl in ("naive", "fused")
    ]
    result = CliRunner().invoke(app, ["spread", str(write_run(tmp_path, "rep", rows))])
    assert result.exit_code == 0 and "2.00 / 2.00 / 4.00" in result.output and "100.0 %" in result.output


def tiny_cpu_config(tmp_path: Path, tiny_config_data: dict[str, Any]) -> Path:
    import yaml

    path = tmp_path / "tc.yaml"
    path.write_text(yaml.safe_dump({**tiny_config_data, "implementations": ["naive", "fused"]}), encoding="utf-8")
    return path


@pytest.mark.parametrize(("timer_ms", "exit_code", "verdict"), [(1.04, 0, "PASS"), (1.10, 1, "FAIL")])
def test_check_timing_passes_within_five_percent(
    tmp_path: Path,
    tiny_config_data: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    timer_ms: float,
    exit_code: int,
    verdict: str,
) -> None:
    monkeypatch.setattr("mhabench.checks.timing._both_medians_ms", lambda *args: (1.0, timer_ms))
    result = CliRunner().invoke(app, ["check-timing", str(tiny_cpu_config(tmp_path, tiny_config_data))])
    assert result.exit_code == exit_code, result.output
    assert result.output.count(verdict) == 2 and ("2 of 2" if verdict == "PASS" else "0 of 2") in result.output


def test_check_timing_really_times_both(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    """Unpatched: both timers run on every (case, implementation) and give positive, finite medians."""
    from mhabench.checks.timing import check_timing
    from mhabench.scenario.loading import load_config

    checks = check_timing(load_config(tiny_cpu_config(tmp_path, tiny_config_data)))
    assert [check.impl for check in checks] == ["naive", "fused"]
    assert all(check.ours_ms > 0 and check.timer_ms > 0 for check in checks)


def test_spread_refuses_a_baseline_the_runs_lack(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["spread", str(spread_run(tmp_path, "a", 1.0)), "--baseline", "nosuch"])
    assert result.exit_code == 2
    assert "--baseline: 'nosuch' is not in these runs (they have fused, naive)" in result.output


def test_check_timing_reports_a_failing_call_and_an_unsupported_case_as_lines(
    tmp_path: Path, tiny_config_data: dict[str, Any], temp_impl: Any
) -> None:
    import yaml

    def explode(x: object) -> object:
        raise RuntimeError("kernel exploded")

    broken = temp_impl(explode)
    data = {
        **tiny_config_data,
        "implementations": [broken, "torch_mha"],
        "scenarios": [{"name": "g", "batch": 1, "seq_len": 8, "d_model": 16, "heads": 4, "kv_heads": 2}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-timing", str(path)])
    assert result.exit_code == 1, result.output
    assert "FAIL: RuntimeError: kernel exploded" in result.output
    assert "not run: torch_mha: no grouped K/V heads" in result.output and "0 of 1 agree" in result.output
