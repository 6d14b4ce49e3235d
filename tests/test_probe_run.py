"""``mhabench probe`` end to end: the files it writes, the verdicts on the shipped config, the report section."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.probe import run as probe_run
from mhabench.probe.claims import CLAIM_COLUMNS, PASS
from mhabench.probe.config import ProbeConfig, load_probe_config, parse_probe_config
from mhabench.probe.report import claims_blocks
from mhabench.probe.run import PROBE_COLUMNS, run_config
from mhabench.results.schema import FORMAT_VERSION
from mhabench.results.store import load_run
from mhabench.views.table import TableModel

CLAIMS_YAML = Path(__file__).resolve().parents[1] / "configs" / "claims.yaml"
TINY = {"name": "t", "seq_len": 12, "d_model": 32, "heads": [4, 1], "samples": 2, "claims": ["var_qk", "equivalence"]}


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _by_claim(records: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {(r["claim"], r["case"]): r["verdict"] for r in records}


def test_a_run_writes_probes_claims_and_a_manifest(tmp_path: Path) -> None:
    config = parse_probe_config({"name": "tiny", "scenarios": [TINY]}, "tiny.yaml")
    threads = torch.get_num_threads()
    result = run_config(config, tmp_path, argv=["mhabench", "probe", "tiny.yaml"])
    assert {p.name for p in result.run_dir.iterdir()} == {"probes.csv", "claims.csv", "manifest.json"}
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert (manifest["kind"], manifest["status"], manifest["cases"]) == ("probe", "complete", 2)
    assert manifest["environment"]["threads"] == 1 and torch.get_num_threads() == threads  # restored afterwards
    probes = _read(result.run_dir / "probes.csv")
    assert list(probes[0]) == PROBE_COLUMNS
    # per head: var_q, var_k, var_scores, var_scores_scaled; per layer: max_rel_err and three parameter counts
    assert len(probes) == (4 + 1) * 4 + 2 * 4
    assert {p["samples"] for p in probes} == {"2"}
    claims = _read(result.run_dir / "claims.csv")
    assert list(claims[0]) == CLAIM_COLUMNS
    verdicts = _by_claim(claims)
    for case in ("t/b1-n12-d32-h4", "t/b1-n12-d32-h1"):
        assert verdicts[("same_output", case)] == verdicts[("same_params", case)] == PASS
    assert claims == [{k: str(v) if v is not None else "" for k, v in r.items()} for r in result.records]


@pytest.fixture(scope="module")
def shipped_claims(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """configs/claims.yaml's head-width scenario with 4 draws instead of 8, to keep the test fast."""
    config = load_probe_config(CLAIMS_YAML)
    scenario = config.scenarios[0].model_copy(update={"samples": 4})
    return run_config(ProbeConfig(name="claims", scenarios=[scenario]), tmp_path_factory.mktemp("out")).records


@pytest.mark.parametrize("heads", [16, 4, 1])
def test_shipped_config_meets_the_issue(shipped_claims: list[dict[str, Any]], heads: int) -> None:
    """var_qk within 10 % of d_k ∈ {16, 64, 256}; rank(S) = min(d_k, L); shared W_Q = W_K beats separate."""
    case = f"head_dim/b1-n128-d256-h{heads}"
    verdicts = _by_claim(shipped_claims)
    for claim in ("var_qk", "var_qk_scaled", "entropy_scaled", "rank_scores", "diag_shared_vs_separate", "psd_bound"):
        assert verdicts[(claim, case)] == PASS, claim
    jl = verdicts[("jl_distortion", case)]
    assert jl == ("PASS" if heads == 1 else "NO-GUARANTEE")  # d_k = 256 ≥ 24·ln 128 ≈ 116 > 64, 16


def test_shipped_config_saturation_trends(shipped_claims: list[dict[str, Any]]) -> None:
    trends = {r["claim"]: r for r in shipped_claims if r["claim"].startswith("trend_")}
    assert {r["verdict"] for r in trends.values()} == {PASS}
    rising = [float(v) for v in trends["trend_unscaled_dead_gradient_share"]["measured"].split(" → ")]
    assert rising == sorted(rising) and rising[-1] > 0.2


def test_cli_prints_the_verdict_table(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [TINY | {"claims": ["rank"], "heads": 4}]}), encoding="utf-8")
    result = CliRunner().invoke(app, ["probe", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "rank(S) = min(d_k, L)" in result.output and "PASS" in result.output
    assert "claims: 1 PASS, 1 NO-GUARANTEE, 1 INFO, 5 UNTESTABLE" in result.output
    (run_dir,) = (tmp_path / "out").iterdir()
    assert f"results: {run_dir}" in result.output


def test_report_blocks(tmp_path: Path) -> None:
    assert claims_blocks(tmp_path) == []
    config = parse_probe_config({"scenarios": [TINY | {"heads": 4}]}, "tiny.yaml")
    run_dir = run_config(config, tmp_path).run_dir
    heading, paragraph, table = claims_blocks(run_dir)
    assert heading.text == "Claims" and paragraph.text.startswith("10 claims: 4 PASS")
    assert isinstance(table, TableModel) and len(table.cells) == 10
    assert table.cells[0][:3] == ["t/b1-n12-d32-h4", "PASS", "Var(q·k) = d_k·σ_q²·σ_k² over token pairs i ≠ j"]


# --- the run-folder lifecycle: a probe run is alive, finished or dead like any run -----------------

STOP_AFTER_FIRST_CASE = """
import json, sys, time
from pathlib import Path
from mhabench.probe import run as probe_run
from mhabench.probe.config import parse_probe_config

measure, calls = probe_run.measure_case, []
def first_case_only(case, source):
    if calls:
        time.sleep(600)  # the parent kills this process here
    calls.append(case)
    return measure(case, source)
probe_run.measure_case = first_case_only
config = parse_probe_config({"name": "killed", "scenarios": [json.loads(sys.argv[2])]}, "tiny.yaml")
probe_run.run_config(config, Path(sys.argv[1]))
"""


def tiny_config() -> ProbeConfig:
    return parse_probe_config({"name": "tiny", "scenarios": [TINY]}, "tiny.yaml")


def test_a_probe_manifest_records_the_format_and_the_writing_process(tmp_path: Path) -> None:
    manifest = json.loads((run_config(tiny_config(), tmp_path).run_dir / "manifest.json").read_text())
    assert (manifest["format_version"], manifest["pid"], manifest["status"]) == (
        FORMAT_VERSION,
        os.getpid(),
        "complete",
    )
    assert manifest["host"] and manifest["heartbeat"] and manifest["finished_at"] >= manifest["started_at"]


def test_a_probe_run_stopped_by_ctrl_c_is_interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measure, calls = probe_run.measure_case, []

    def stop_at_second_case(case: Any, source: Any) -> Any:
        if calls:
            raise KeyboardInterrupt
        calls.append(case)
        return measure(case, source)

    monkeypatch.setattr(probe_run, "measure_case", stop_at_second_case)
    with pytest.raises(KeyboardInterrupt):
        run_config(tiny_config(), tmp_path)
    (run_dir,) = tmp_path.iterdir()
    assert load_run(run_dir).manifest.status == "interrupted"
    assert {p["case_id"] for p in _read(run_dir / "probes.csv")} == {"t/b1-n12-d32-h4"}  # the finished case stays


def test_a_killed_probe_run_is_not_running_forever(tmp_path: Path) -> None:
    """SIGKILL a probe run after its first case: it wrote nothing more, yet it reads as interrupted."""
    child = subprocess.Popen(
        [sys.executable, "-c", STOP_AFTER_FIRST_CASE, str(tmp_path), json.dumps(TINY)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("*/probes.csv")) and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    (probes,) = tmp_path.glob("*/probes.csv")
    assert load_run(probes.parent).manifest.status == "running"  # alive: the child is still measuring
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert json.loads((probes.parent / "manifest.json").read_text())["status"] == "running"  # as the kill left it
    assert load_run(probes.parent).manifest.status == "interrupted"
