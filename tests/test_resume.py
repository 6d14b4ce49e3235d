"""``run --resume``: which runs may be finished here, and a run killed with SIGKILL finished exactly.

The refusal tests build run folders by hand (rows written by the real ``RunWriter``, a manifest as
the runner writes it); the end-to-end test starts ``python -m mhabench run`` in a child process,
kills it with SIGKILL after a random number of rows, and resumes it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from child_runs import wait_for_rows
from conftest import TINY_TIMING
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import ConfigError, InputError, PluginError
from mhabench.measure.environment import environment
from mhabench.results.liveness import liveness_fields
from mhabench.results.schema import FORMAT_VERSION, Outcome, ResultRow
from mhabench.results.store import RunWriter, load_run, write_manifest
from mhabench.run.case import identity
from mhabench.run.resume import NothingToResumeError, prepare_resume
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.loading import parse_config

CPU = torch.device("cpu")
CONFIG: dict[str, Any] = {
    "name": "tiny",
    "device": "cpu",
    "implementations": ["naive", "fused"],
    "timing": dict(TINY_TIMING),
    "scenarios": [{"name": "t", "seq_len": [8, 16, 24, 32], "d_model": 16, "heads": 2}],
}
Key = tuple[str, str, int]


def all_keys(config_data: dict[str, Any] = CONFIG) -> list[Key]:
    """Every (case_id, impl, repeat) an uninterrupted run of the config has, in run order."""
    config = parse_config(config_data, "tiny.yaml")
    return [(case.case_id, name, 0) for case in expand_cases(config, CPU) for name in config.implementations or []]


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def synthetic_run(
    root: Path, done: int, *, status: str = "running", config: dict[str, Any] = CONFIG, **manifest: Any
) -> Path:
    """A run of ``config`` killed after ``done`` rows (``error`` rows: nothing is measured here)."""
    parsed = parse_config(config, "tiny.yaml")
    run_dir = root / f"run-{done}-{status}"
    run_dir.mkdir(parents=True)
    writer = RunWriter(run_dir)
    for case in expand_cases(parsed, CPU):
        for name in parsed.implementations or []:
            if len(writer.rows) < done:
                writer.append(ResultRow(identity(writer.run_id, case, name, CPU), Outcome("error", "synthetic")))
    write_manifest(
        writer.run_dir,
        {
            "run_id": writer.run_id,
            "format_version": FORMAT_VERSION,
            "config": parsed.model_dump(mode="json"),
            "environment": environment(CPU),
            "repeats": 1,
            "status": status,
            "pid": dead_pid(),
            "host": socket.gethostname(),
            **manifest,
        },
    )
    return run_dir


def keys_on_disk(run_dir: Path) -> list[Key]:
    rows = load_run(run_dir).frame
    return list(zip(rows["case_id"], rows["impl"], rows["repeat"].astype(int), strict=True))


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


# --- may this run be resumed? --------------------------------------------------------------------


def test_a_killed_run_resumes_with_its_recorded_config(tmp_path: Path) -> None:
    run_dir = synthetic_run(tmp_path, 3)
    plan = prepare_resume(run_dir.name, tmp_path, force=False)
    assert (plan.run_dir, plan.differences) == (run_dir, ())
    assert plan.config == parse_config(CONFIG, "tiny.yaml")
    assert plan.shard is None


def test_a_live_run_is_refused_even_with_force(tmp_path: Path) -> None:
    run_dir = synthetic_run(tmp_path, 3, **liveness_fields())  # this test's own process: alive
    with pytest.raises(InputError, match=rf"still running \(pid {os.getpid()} on "):
        prepare_resume(str(run_dir), tmp_path, force=True)


def test_a_complete_run_has_nothing_to_resume_and_exits_0(tmp_path: Path) -> None:
    run_dir = synthetic_run(tmp_path, len(all_keys()), status="complete")
    with pytest.raises(NothingToResumeError, match="nothing to resume") as caught:
        prepare_resume("latest", tmp_path, force=True)
    assert caught.value.exit_code == 0
    code, stderr = cli("run", "--resume", str(run_dir))
    assert code == 0 and "nothing to resume" in stderr and len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("field", "then"),
    [("mhabench_version", "0.0.1"), ("torch", "1.13.0"), ("device_name", "Another CPU"), ("device", "cuda:0")],
)
def test_another_mhabench_torch_or_device_is_refused_unless_forced(tmp_path: Path, field: str, then: str) -> None:
    run_dir = synthetic_run(tmp_path, 2, environment={**environment(CPU), field: then})
    with pytest.raises(InputError, match=rf"cannot resume: {field} '{then}' then, .* now .*--force") as caught:
        prepare_resume(str(run_dir), tmp_path, force=False)
    assert "\n" not in str(caught.value)
    plan = prepare_resume(str(run_dir), tmp_path, force=True)
    assert len(plan.differences) == 1 and plan.differences[0].startswith(f"{field} '{then}' then")


def test_an_older_format_needs_force_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    older = synthetic_run(tmp_path / "old", 2, format_version=FORMAT_VERSION - 1)
    with pytest.raises(InputError, match=f"result format version {FORMAT_VERSION - 1} then"):
        prepare_resume(str(older), tmp_path, force=False)
    assert prepare_resume(str(older), tmp_path, force=True).differences
    for version in (FORMAT_VERSION + 1, "3"):
        newer = synthetic_run(tmp_path / str(version), 2, format_version=version)
        with pytest.raises(InputError, match="cannot resume it"):
            prepare_resume(str(newer), tmp_path, force=True)


def test_a_config_that_no_longer_validates_is_refused_even_with_force(tmp_path: Path) -> None:
    run_dir = synthetic_run(tmp_path, 2)
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["config"]["scenarios"][0]["heads"] = [3]
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"manifest\.json: scenarios\[0\]\.heads: d_model 16 is not divisible"):
        prepare_resume(str(run_dir), tmp_path, force=True)
    del manifest["config"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(InputError, match="no config recorded"):
        prepare_resume(str(run_dir), tmp_path, force=True)


def test_rows_the_config_would_not_produce_are_a_difference(tmp_path: Path) -> None:
    run_dir = synthetic_run(tmp_path, 2)
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["config"]["scenarios"][0]["seq_len"] = [40, 48]  # the folder's rows are n8: another sweep
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(InputError, match=r"2 row\(s\) are not cases of the recorded config \(e\.g\. 't/b1-n8"):
        prepare_resume(str(run_dir), tmp_path, force=False)


def test_the_run_s_plugins_are_loaded_again(tmp_path: Path, registry_snapshot: None) -> None:
    plugin = tmp_path / "resumed_plugin.py"
    plugin.write_text(
        "import mhabench\n\n@mhabench.register('resumed_impl', description='test only')\n"
        "def resumed_impl(weights, heads, causal):\n    return mhabench.build('naive', weights, heads, causal)\n",
        encoding="utf-8",
    )
    run_dir = synthetic_run(tmp_path, 0, plugins=[str(plugin)], config={**CONFIG, "implementations": ["naive"]})
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest["config"]["implementations"] = ["naive", "resumed_impl"]  # as the run resolved --plugin
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert prepare_resume(str(run_dir), tmp_path, force=False).config.implementations == ["naive", "resumed_impl"]
    moved = synthetic_run(tmp_path / "moved", 0, plugins=[str(tmp_path / "gone.py")])
    with pytest.raises(PluginError, match=r"gone\.py: no such plugin file"):
        prepare_resume(str(moved), tmp_path, force=True)


# --- the command line ------------------------------------------------------------------------------


def test_cli_refuses_in_one_line_then_force_finishes_the_run(tmp_path: Path, fixed_peaks: Any) -> None:
    """Another torch: exit 2, one line. ``--force``: the missing rows are measured, a half-written line dropped."""
    run_dir = synthetic_run(tmp_path, len(all_keys()) - 1, environment={**environment(CPU), "torch": "1.13.0"})
    with open(run_dir / "results.csv", "ab") as handle:
        handle.write(b"synthetic,t,t/b1-n32-d16-h2-float32,fus")  # the last row, cut short by the kill
    code, stderr = cli("run", "--resume", str(run_dir))
    assert code == 2 and stderr.startswith("error: ") and len(stderr.strip().splitlines()) == 1
    assert "torch '1.13.0' then" in stderr
    code, stderr = cli("run", "--resume", str(run_dir), "--force")
    assert code == 0, stderr
    assert keys_on_disk(run_dir) == all_keys()
    manifest = load_run(run_dir).manifest.as_dict()
    assert manifest["status"] == "complete" and len(manifest["resumed"]) == 1


def test_a_run_killed_at_a_random_row_resumes_to_the_uninterrupted_rows(tmp_path: Path, fixed_peaks: Any) -> None:
    """SIGKILL a real ``mhabench run`` after k rows (k random, at least one case still to go), then resume."""
    expected = all_keys()
    k = random.Random().randint(1, len(expected) - 2)  # rows of a case arrive together: leave one case
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-m", "mhabench", "run", str(config), "--out", str(tmp_path / "out")],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    run_dir = wait_for_rows(child, tmp_path / "out", k)
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed = keys_on_disk(run_dir)
    assert k <= len(killed) < len(expected), (k, killed)
    assert load_run(run_dir).manifest.status == "interrupted"  # the dead process is noticed

    code, stderr = cli("run", "--resume", "latest", "--out", str(tmp_path / "out"))
    assert code == 0, (k, stderr)
    run = load_run(run_dir)
    assert sorted(keys_on_disk(run_dir)) == sorted(expected), k  # every row once, none twice
    assert keys_on_disk(run_dir)[: len(killed)] == killed  # the finished rows were kept, not measured again
    assert run.manifest.status == "complete"
    ok = run.frame[run.frame["status"] == "ok"]
    assert all(len(samples) for samples in ok["times_ms"]), k  # no row lost its raw samples
