"""The command line through Typer's CliRunner (and ``python -m mhabench`` once, in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from conftest import CORE_IMPLEMENTATIONS
from typer.testing import CliRunner, Result

import mhabench
from mhabench.cli import app
from mhabench.impls.registry import available_implementations
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.store import load_run

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")


def invoke(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def write_config(tmp_path: Path, data: dict[str, Any], name: str = "tiny.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def table_rows(output: str) -> list[dict[str, str]]:
    """The cells of the Rich table in ``output``, one dict per body row keyed by the header, so a test checks a
    row's cells rather than a name that the title may also contain. A blank ``case`` cell is the case of the row
    above (the run summary writes each case once)."""
    lines = output.splitlines()
    header = [cell.strip() for cell in next(line for line in lines if line.startswith("┃")).strip("┃").split("┃")]
    rows: list[dict[str, str]] = []
    for line in (line for line in lines if line.startswith("│")):
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        assert len(cells) == len(header), line
        row = dict(zip(header, cells, strict=True))
        if row.get("case") == "" and rows:
            row["case"] = rows[-1]["case"]
        rows.append(row)
    return rows


def assert_input_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for fragment in fragments:
        assert fragment in result.output


def test_tiny_run_writes_its_files_and_prints_the_wide_table(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["naive", "fused"]})
    out = tmp_path / "out"
    result = invoke("run", config, "--out", out, "--wide")
    assert result.exit_code == 0, result.output
    (run_dir,) = out.iterdir()
    assert {p.name for p in run_dir.iterdir()} == {"results.csv", "results.parquet", "manifest.json", "answers.json"}
    assert f"results: {run_dir}" in result.output
    table = table_rows(result.output)
    measured = load_run(run_dir).frame.set_index("impl")
    assert [row["impl"] for row in table] == ["naive", "fused"] == list(measured.index)
    assert all(row["case"].startswith("n=9 h=2 d=16 b=2") for row in table)  # the one case, both rows
    assert all(row["status"].startswith("ok") for row in table)
    assert table[0]["speedup vs naive"].startswith("1.00×")  # naive against itself
    assert not table[1]["speedup vs naive"].startswith("1.00×")  # fused's own ratio, not a copy of the baseline's
    for row in table:  # the printed median is the measured one (to the table's 3 decimals)
        printed_ms = float(row["median ms (IQR)"].split()[0])
        assert printed_ms == pytest.approx(measured.loc[row["impl"], "latency_ms"], abs=6e-4)


def test_baseline_flag_sets_the_summary_speedups(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["naive", "fused"]})
    result = invoke("run", config, "--out", tmp_path / "out", "--baseline", "fused", "--wide")
    assert result.exit_code == 0, result.output
    speedups = {row["impl"]: row["speedup vs fused"] for row in table_rows(result.output)}  # KeyError: wrong header
    assert speedups["fused"].startswith("1.00×")  # the baseline against itself
    assert not speedups["naive"].startswith("1.00×")
    assert "speedup vs naive" not in result.output


def test_unknown_baseline_exits_2_before_running(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    config = write_config(tmp_path, tiny_config_data)
    result = invoke("run", config, "--out", tmp_path / "out", "--baseline", "nope")
    assert_input_error(result, "--baseline", "'nope'")
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_impl_flag_restricts_the_run(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = write_config(tmp_path, tiny_config_data)
    result = invoke("run", config, "--out", tmp_path / "out", "--impl", "fused", "--device", "cpu")
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").iterdir()
    lines = (run_dir / "results.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and ",fused," in lines[1]


def test_list_has_one_row_per_registered_implementation() -> None:
    result = invoke("list")
    assert result.exit_code == 0
    rows = {row["implementation"]: row for row in table_rows(result.output)}
    assert list(rows) == available_implementations()
    assert [name for name, row in rows.items() if row["default"] == "yes"] == list(CORE_IMPLEMENTATIONS)
    assert rows["naive"]["cost model"] == "materialized" and rows["fused"]["cost model"] == "fused"
    assert rows["naive"]["what it does"].startswith("Q/K/V GEMMs")


def test_list_markdown_is_generated_from_the_registry(temp_impl: Any) -> None:
    """One Markdown row per registered implementation, in registration order, its cells read off the spec."""
    extra = temp_impl(lambda x: x)  # registered now: the table is the registry, not a fixed list
    result = invoke("list", "--markdown")
    assert result.exit_code == 0, result.output
    header, rule, *body = result.output.strip().splitlines()
    assert header.startswith("| implementation | set | cost model |") and set(rule) <= set("|- ")
    rows = {
        cells[0].strip("`"): cells
        for cells in (line.removeprefix("| ").removesuffix(" |").split(" | ") for line in body)
    }
    assert list(rows) == available_implementations() and extra in rows
    assert [name for name, cells in rows.items() if cells[1] == "core"] == list(CORE_IMPLEMENTATIONS)
    assert rows[extra][1:3] == ["opt-in", "none"]  # no cost model declared
    assert rows["flash_attn"][3] == "cuda; fp16, bf16; GQA, train; head_dim ≤ 256; needs `flash_attn`"
    # no grouped K/V heads, no decode, no head_dim set apart
    assert rows["torch_mha"][3] == "cpu, cuda; fp32, fp16, bf16; train; heads d_model / h wide only"
    assert "torchrun" in rows["tp_naive"][3] and "compiles on first call" in rows["compiled"][3]


def test_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"mhabench {mhabench.__version__}"


def test_bad_config_exits_2_naming_the_field(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    bad = {**tiny_config_data, "scenarios": [{"seq_len": 8, "d_model": 500, "heads": 8}]}
    result = invoke("run", write_config(tmp_path, bad), "--out", tmp_path / "out")
    assert_input_error(result, "scenarios[0].heads", "d_model 500 is not divisible by heads 8")
    assert not (tmp_path / "out").exists()


def test_typo_exits_2_with_suggestion(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    bad = {**tiny_config_data, "scenarios": [{"seq_len": 8, "d_model": 16, "heads": 2, "sead": 1}]}
    assert_input_error(invoke("run", write_config(tmp_path, bad)), "scenarios[0].sead", "did you mean 'seed'?")


def test_malformed_yaml_and_missing_file_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("scenarios: [\n  {seq_len: 8,,\n", encoding="utf-8")
    assert_input_error(invoke("run", broken, "--dry-run"), "invalid YAML at line")
    assert_input_error(invoke("run", tmp_path / "absent.yaml"), "absent.yaml", "no such file")


@no_cuda
def test_device_cuda_without_cuda_exits_2(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    result = invoke("run", write_config(tmp_path, tiny_config_data), "--device", "cuda", "--out", tmp_path / "out")
    assert_input_error(result, "CUDA is not available")
    assert not (tmp_path / "out").exists()


def test_bad_device_flag_exits_2(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    result = invoke("run", write_config(tmp_path, tiny_config_data), "--device", "tpu", "--dry-run")
    assert_input_error(result, "--device", "'tpu'")


def test_unknown_impl_exits_2_listing_known(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    result = invoke("run", write_config(tmp_path, tiny_config_data), "--impl", "nope", "--out", tmp_path / "out")
    assert_input_error(result, "--impl", "'nope'", *CORE_IMPLEMENTATIONS)
    assert not (tmp_path / "out").exists()


def test_dry_run_writes_nothing(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    out = tmp_path / "out"
    result = invoke("run", write_config(tmp_path, tiny_config_data), "--out", out, "--dry-run")
    assert result.exit_code == 0, result.output
    assert not out.exists()
    planned = [(row["case"], row["impl"]) for row in table_rows(result.output)]
    assert [impl for _, impl in planned] == list(CORE_IMPLEMENTATIONS)  # every core implementation, in order
    assert all(case.startswith("t/b2-n9-d16-h2") for case, _ in planned)  # of the config's one case


def test_dry_run_without_config_plans_the_embedded_default(tmp_path: Path) -> None:
    result = invoke("run", "--dry-run", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "seq-sweep/" in result.output
    assert not (tmp_path / "out").exists()


def test_python_dash_m_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mhabench", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"mhabench {mhabench.__version__}"


def test_an_output_folder_that_cannot_be_created_is_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = tmp_path / "c.yaml"
    config.write_text("scenarios:\n  - {seq_len: 8, d_model: 16, heads: 2}\n")
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(blocker / "sub")])
    assert result.exit_code == 2
    assert "--out: cannot create a run folder" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("flags", "status"), [((), "skipped"), (("--no-memory-guard",), "ok")])
def test_no_memory_guard_tries_what_the_guard_would_skip(
    tmp_path: Path,
    tiny_config_data: dict[str, Any],
    fixed_peaks: DevicePeaks,
    monkeypatch: pytest.MonkeyPatch,
    flags: tuple[str, ...],
    status: str,
) -> None:
    """The guard's verdict is mocked ("will not fit"); --no-memory-guard runs the case anyway."""
    monkeypatch.setattr("mhabench.run.memory_guard.fits", lambda *args, **kwargs: "predicted 9 GB > available 1 GB")
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["fused"]})
    result = invoke("run", config, "--out", tmp_path / "out", *flags)
    assert result.exit_code == 0, result.output
    (run_dir,) = (tmp_path / "out").iterdir()
    assert list(load_run(run_dir).frame["status"]) == [status]


def test_allocator_option_is_recorded_and_checked(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["fused"]})
    assert invoke("run", config, "--out", tmp_path / "out", "--allocator", "system").exit_code == 0
    (run_dir,) = (tmp_path / "out").iterdir()
    assert load_run(run_dir).manifest.environment["allocator"] == "system"
    bad = invoke("run", config, "--out", tmp_path / "out", "--allocator", "jemalloc")
    assert bad.exit_code == 2 and "--allocator: must be steady or system" in bad.output


def test_resume_refuses_other_run_options_in_one_line(tmp_path: Path) -> None:
    """A resumed run keeps the settings it started with: --impl or --isolation would be silently ignored."""
    result = invoke("run", "--resume", "latest", "--out", tmp_path, "--impl", "naive", "--isolation", "process")
    assert result.exit_code == 2
    assert "--resume: finishes a run with the settings it started with; drop --impl, --isolation" in result.output


def test_threads_option_sets_and_records_the_thread_count(
    tmp_path: Path, tiny_config_data: dict[str, Any], fixed_peaks: DevicePeaks
) -> None:
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["fused"]})
    assert invoke("run", config, "--out", tmp_path / "out", "--threads", "1").exit_code == 0
    (run_dir,) = (tmp_path / "out").iterdir()
    manifest = load_run(run_dir).manifest.as_dict()
    assert manifest["environment"]["threads"] == 1 and manifest["config"]["threads"] == 1
    bad = invoke("run", config, "--out", tmp_path / "out", "--threads", "0")
    assert bad.exit_code == 2 and "--threads: must be between 1 and 4096" in bad.output


def test_profiled_keeps_the_exit_status_and_writes_the_statistics(tmp_path: Path) -> None:
    """``python -m cProfile`` would turn this bad-input exit 2 into 0 (make gpu-sweep PROFILE=1)."""
    stats = tmp_path / "run.prof"
    done = subprocess.run(
        [sys.executable, "-m", "mhabench.profiled", str(stats), "run", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "missing.yaml" in done.stderr
    assert stats.stat().st_size > 0 and "cumtime" in done.stdout and "mhabench/cli.py" in done.stdout


def test_a_run_says_which_windows_covered_their_sequence(tmp_path: Path, tiny_config_data: dict[str, Any]) -> None:
    """Issue 29: a window that covers the sequence becomes plain causal, and the run says so."""
    scenario = {"name": "w", "seq_len": [8, 16], "d_model": 16, "heads": 2, "mask": "sliding_window", "window": [4, 8]}
    config = write_config(tmp_path, {**tiny_config_data, "implementations": ["naive"], "scenarios": [scenario]})
    result = invoke("run", config, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    expected = "scenario 'w': window 8 covers the whole sequence at n=8: run as plain causal attention"
    assert expected in result.stderr.replace("\n", " ")
