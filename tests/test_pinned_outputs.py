"""The same run folder gives the same report text and tables, byte for byte.

A refactor of the read side, the analysis or the views must not change what a user reads. Two run folders are
pinned: a tiny CPU run kept in ``tests/data/pinned_run`` (four implementations that ran, two that were
unsupported; made by ``mhabench run tests/data/pinned_run/pin.yaml``), and the recorded H100 run in
``shared/runs`` where it is on the machine. Each command's output is compared with a golden file in
``tests/data/pinned_run/golden``: for both runs the answer as codes and numbers (``advise`` and ``explain``
``--format json``), the comparison and the report; the sentences once per format, on the CPU run (the templates
are the same for every run). After a change that *means* to alter an output, regenerate the golden files
with ``MHABENCH_REGOLD=1 pytest tests/test_pinned_outputs.py`` and read the diff before committing it.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mhabench.cli import app

DATA = Path(__file__).parent / "data" / "pinned_run"
GOLDEN = DATA / "golden"
CPU_RUN_ID = "20261127T094213Z-pin"
REGOLD = os.environ.get("MHABENCH_REGOLD") == "1"
cli = CliRunner()


def _commands(run: Path, rendered: bool) -> dict[str, list[str]]:
    """The pinned commands: a name for the golden file and the command line (report is read from disk); with
    ``rendered``, advise's and explain's sentences in each format too."""
    commands = {
        "advise.json": ["advise", str(run), "--format", "json"],
        "compare.txt": ["compare", str(run)],
        "explain.json": ["explain", str(run), "--format", "json"],
    }
    if rendered:
        commands.update(
            {
                "advise.txt": ["advise", str(run)],
                "advise.md": ["advise", str(run), "--format", "md"],
                "explain.txt": ["explain", str(run)],
                "explain.md": ["explain", str(run), "--format", "md"],
            }
        )
    return commands


def _check(name: str, text: str) -> None:
    """``text`` equals the golden file ``name``; with MHABENCH_REGOLD=1 the golden file is rewritten."""
    golden = GOLDEN / name
    if REGOLD:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden file {golden}: run with MHABENCH_REGOLD=1 once"
    assert text == golden.read_text(encoding="utf-8"), f"{name} changed (see the module docstring)"


def _pin(run: Path, prefix: str, tmp_path: Path, rendered: bool = False) -> None:
    for name, args in _commands(run, rendered).items():
        result = cli.invoke(app, args)
        assert result.exit_code == 0, result.output
        _check(f"{prefix}-{name}", result.output.replace(str(run), "RUN"))
    out = tmp_path / "report"
    result = cli.invoke(app, ["report", str(run), "--format", "md", "--out", str(out)])
    assert result.exit_code == 0, result.output
    _check(f"{prefix}-report.md", (out / "report.md").read_text(encoding="utf-8").replace(str(run), "RUN"))


@pytest.fixture
def cpu_run(tmp_path: Path) -> Path:
    """A copy of the pinned CPU run (report writes beside it)."""
    return Path(shutil.copytree(DATA / CPU_RUN_ID, tmp_path / "runs" / CPU_RUN_ID))


def test_cpu_run_outputs_are_pinned(cpu_run: Path, tmp_path: Path) -> None:
    _pin(cpu_run, "cpu", tmp_path, rendered=True)


def test_h100_run_outputs_are_pinned(h100_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(h100_run, tmp_path / "runs" / h100_run.name))
    _pin(run, "h100", tmp_path)


def test_unsupported_rows_carry_a_reason_code_beside_their_text(tmp_path: Path) -> None:
    """A fresh CPU run of the pinned scenario: cuDNN's SDPA (torch refuses it on the CPU) and flash_attn (not
    installed) are unsupported with the codes checks match; ok rows have no code."""
    result = cli.invoke(
        app,
        [
            "run",
            str(DATA / "pin.yaml"),
            "--out",
            str(tmp_path),
            "--impl",
            "fused",
            "--impl",
            "sdpa_cudnn",
            "--impl",
            "flash_attn",
        ],
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = tmp_path.iterdir()
    with open(run_dir / "results.csv", encoding="utf-8") as handle:
        codes = {(row["impl"], row["status"], row["reason_code"]) for row in csv.DictReader(handle)}
    assert codes == {
        ("fused", "ok", ""),
        ("sdpa_cudnn", "unsupported", "sdpa_no_kernel"),
        ("flash_attn", "unsupported", "not_installed"),
    }


def test_the_advice_under_a_run_is_the_same_from_held_rows_as_from_disk(tmp_path: Path) -> None:
    """``run`` advises from the rows it holds (no second read of the folder): every statement and figure of
    ``advise --format json`` equals what the folder, read back, gives."""
    from mhabench.analysis.advice.advise import advise
    from mhabench.results.store import held_run, load_run
    from mhabench.run import runner
    from mhabench.scenario.loading import load_config
    from mhabench.views.advice import to_json

    result = runner.run(load_config(DATA / "pin.yaml"), tmp_path)
    assert result.manifest is not None and result.manifest.status == "complete"
    held = held_run(result.run_dir, result.manifest, result.rows)
    assert to_json(advise([held])) == to_json(advise([load_run(result.run_dir)]))
