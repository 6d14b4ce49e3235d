"""``run --executor slurm|ray`` for real on this machine: submitit's local executor and a local Ray cluster (2 CPUs)
each measure a tiny sweep into one run folder that matches the same config run here, row for row in shape and
status; a worker killed mid-case costs that case's missing rows (Slurm: crashed rows) or nothing (Ray: retried);
a driver killed mid-sweep leaves a folder ``--resume`` finishes. Options and missing engines: one line, exit 2.
"""

from __future__ import annotations

import importlib.util
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from child_runs import wait_for_rows
from conftest import TINY_TIMING
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.results.columns import SHAPE_FIELDS
from mhabench.results.schema import ResultRow
from mhabench.results.store import Run, load_run
from mhabench.run.executors.worker import read_stream

HAVE_RAY = importlib.util.find_spec("ray") is not None
HAVE_SUBMITIT = importlib.util.find_spec("submitit") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="needs ray (pip install 'mhabench[ray]'; make test installs it)")
needs_submitit = pytest.mark.skipif(not HAVE_SUBMITIT, reason="needs submitit (pip install 'mhabench[slurm]')")

SCENARIO = {"name": "t", "seq_len": [16, 32], "d_model": 16, "heads": 2}
"""Two cases of the core implementations: 8 rows."""
IMPLS = ["naive", "fused"]
LOCAL_SUBMITIT = {"kind": "slurm", "slurm": {"cluster": "local", "gpus_per_job": 0, "time_limit_min": 5}}

KILLER = """
import os, signal
from pathlib import Path

import mhabench

MARKER = Path({marker!r})


def killer(weights, heads, pattern):
    inner = mhabench.build("naive", weights, heads, pattern)

    class Killer(type(inner)):
        def forward(self, x):
            if x.shape[1] == {seq_len} and ({always} or not MARKER.exists()):
                MARKER.write_text(str(os.getpid()), encoding="ascii")
                os.kill(os.getpid(), signal.SIGKILL)
            return super().forward(x)

    inner.__class__ = Killer
    return inner


mhabench.register("killer", description="test only: kills its process on one case", cost=None)(killer)
"""


def config_file(folder: Path, name: str, **fields: Any) -> Path:
    data = {"name": name, "device": "cpu", "threads": 1, "timing": dict(TINY_TIMING), "scenarios": [SCENARIO], **fields}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr


def only_run(out: Path) -> Run:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return load_run(run_dir)


def key(row: ResultRow) -> tuple[str, str, int]:
    return (row.case.case_id, row.case.impl, row.case.repeat)


def shape_and_status(run: Run) -> dict[tuple[str, str, int], tuple[Any, ...]]:
    """Per row: its shape columns, status and which groups it measured (a row's shape, not its numbers)."""
    record = {key(row): row for row in run.rows}
    return {
        k: (
            tuple(getattr(row.case, f) for f in SHAPE_FIELDS),
            row.status,
            row.latency is not None,
            row.memory is not None,
            row.cost is not None,
        )
        for k, row in record.items()
    }


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The config measured in this process: what every engine must reproduce row for row."""
    folder = tmp_path_factory.mktemp("local")
    code, stderr = cli("run", str(config_file(folder, "sweep")), "--out", str(folder / "out"))
    assert code == 0, stderr
    return only_run(folder / "out")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """One local Ray cluster of 2 CPUs for the module (started here, stopped here); its address."""
    if not HAVE_RAY:
        pytest.skip("needs ray")
    import logging

    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


# --- options and missing engines: one line, exit 2 ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--executor", "kubernetes"), "--executor: must be one of local, slurm, ray (got 'kubernetes')"),
        (("--ray-address", "10.0.0.1:6379"), "--ray-address: joins a Ray cluster; it needs --executor ray"),
        (("--executor", "ray", "--shard", "0/2"), "--shard: executor ray schedules the whole sweep itself"),
        (("--executor", "slurm", "--replicates", "2"), "replicates: 2 runs its processes one after another"),
    ],
)
def test_bad_executor_options_are_one_line(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    code, stderr = cli("run", str(config_file(tmp_path, "bad")), "--out", str(tmp_path / "out"), *args)
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert expected in stderr


def test_a_bad_executor_block_names_the_field(tmp_path: Path) -> None:
    path = config_file(tmp_path, "bad", executor={"kind": "slurm", "slurm": {"gpus_per_job": -1}})
    code, stderr = cli("run", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert "executor.slurm.gpus_per_job" in stderr


@pytest.mark.parametrize(("kind", "package", "extra"), [("slurm", "submitit", "slurm"), ("ray", "ray", "ray")])
def test_without_the_engine_the_executor_is_refused_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, package: str, extra: str
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a))
    code, stderr = cli("run", str(config_file(tmp_path, "missing")), "--out", str(tmp_path / "out"), "--executor", kind)
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert f"pip install 'mhabench[{extra}]'" in stderr and package in stderr
    assert not (tmp_path / "out").exists()  # refused before a folder was made


@needs_submitit
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--device", "cuda:1"), "device: 'cuda:1' names one GPU of one machine; with executor slurm use cuda"),
        (("--device", "cuda"), "dtype: 'auto' depends on the workers' GPU, which this driver cannot see"),
    ],
)
def test_a_cluster_device_is_the_workers_and_refused_in_one_line(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    """Checked on the driver before anything is submitted or written (this machine has no CUDA)."""
    if torch.cuda.is_available():
        pytest.skip("the driver sees a GPU here")
    path = config_file(tmp_path, "gpu", executor=LOCAL_SUBMITIT)
    code, stderr = cli("run", str(path), "--out", str(tmp_path / "out"), *args)
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert expected in stderr
    assert not (tmp_path / "out").exists()


def test_a_row_stream_read_mid_write_keeps_only_whole_records(tmp_path: Path) -> None:
    """The driver reads a job's row file while the job appends to it: a record cut short waits for the next read."""
    stream = tmp_path / "rows"
    whole = [("worker", "w", {}), ("row", 1), ("row", 2)]
    data = b"".join(pickle.dumps(record) for record in whole)
    stream.write_bytes(data + pickle.dumps(("row", 3))[:-3])
    assert read_stream(stream, 0) == whole
    assert read_stream(stream, 2) == whole[2:]
    assert read_stream(tmp_path / "not-yet", 0) == []


@needs_submitit
def test_a_slurm_job_that_raised_is_named_by_its_exception_line() -> None:
    from mhabench.run.executors.slurm_jobs import raised_line

    trace = (
        "Job (task=0) failed during processing with trace:\n----------------------\nTraceback (most recent call "
        'last):\n  File "x.py", line 1, in <module>\nmhabench.errors.PluginError: /a/b.py: no such plugin file\n\n'
        "----------------------\nYou can check full logs with 'job.stderr(0)' and 'job.stdout(0)'or at paths:\n"
    )
    assert raised_line(trace) == "mhabench.errors.PluginError: /a/b.py: no such plugin file"
    assert raised_line("the job vanished") == "the job vanished"


# --- the engines, for real ----------------------------------------------------------------------------------------


@pytest.mark.cluster
@needs_submitit
def test_submitit_local_executor_matches_the_local_run(tmp_path: Path, local_run: Run) -> None:
    path = config_file(tmp_path, "sweep", executor={**LOCAL_SUBMITIT, "slurm": {**LOCAL_SUBMITIT["slurm"]}})
    started = time.monotonic()
    code, stderr = cli("run", str(path), "--out", str(tmp_path / "out"))
    print(f"submitit local executor: {time.monotonic() - started:.1f} s for {len(local_run.rows)} rows")
    assert code == 0, stderr
    run = only_run(tmp_path / "out")
    assert shape_and_status(run) == shape_and_status(local_run)
    assert run.manifest.status == "complete" and run.manifest.environment["executor"] == "slurm"
    workers = run.manifest.as_dict()["workers"]
    assert sorted(w["group"] for w in workers) == [0, 1]  # one job per case, each with its host and device
    assert all(w["device_id"] == f"{w['host']}:cpu" and w["job"] for w in workers)
    assert {row.case.device_id for row in run.rows} == {workers[0]["device_id"]}
    assert (run.path / "slurm").is_dir()  # submitit's own logs and pickles, with the run


@pytest.mark.cluster
@needs_ray
def test_ray_tasks_match_the_local_run(tmp_path: Path, local_run: Run, ray_cluster: str) -> None:
    started = time.monotonic()
    code, stderr = cli("run", str(config_file(tmp_path, "sweep")), "--out", str(tmp_path / "out"), "--executor", "ray")
    print(f"ray, local cluster of 2 CPUs: {time.monotonic() - started:.1f} s for {len(local_run.rows)} rows")
    assert code == 0, stderr
    run = only_run(tmp_path / "out")
    assert shape_and_status(run) == shape_and_status(local_run)
    assert run.manifest.status == "complete" and run.manifest.environment["executor"] == "ray"
    assert len(run.manifest.as_dict()["workers"]) == 2  # one task per case
    assert all(row.case.device_id.endswith(":cpu") for row in run.rows)


@pytest.mark.cluster
@needs_submitit
def test_a_slurm_job_killed_mid_case_loses_only_that_case_s_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both cases in one job, which dies in its second case (n=32): the first case's rows were streamed and stay.

    submitit waits up to 15 s for a finished job's result file to appear on a slow shared file system; the local
    executor's jobs write to this machine's disk, where a killed job's file never comes, so the test does not wait."""
    import submitit

    monkeypatch.setattr(submitit.core.core.Job, "_results_timeout_s", 0)
    plugin = tmp_path / "killer.py"
    plugin.write_text(KILLER.format(marker=str(tmp_path / "killed"), always=True, seq_len=32), encoding="utf-8")
    executor = {**LOCAL_SUBMITIT, "slurm": {**LOCAL_SUBMITIT["slurm"], "cases_per_job": 2}}
    path = config_file(tmp_path, "killed", executor=executor, implementations=["naive", "fused", "killer"])
    code, stderr = cli("run", str(path), "--out", str(tmp_path / "out"), "--plugin", str(plugin))
    assert code == 0, stderr
    run = only_run(tmp_path / "out")
    assert (tmp_path / "killed").exists()  # the worker was killed
    statuses = {key(row): row.status for row in run.rows}
    assert len(statuses) == len(run.rows) == 6  # every (case, implementation) once
    lost = {k for k, status in statuses.items() if status != "ok"}
    assert lost and all(case_id.endswith("n32-d16-h2-float32") for case_id, _, _ in lost)
    assert all(status == "crashed" for k, status in statuses.items() if k in lost)
    crashed = next(row for row in run.rows if row.status == "crashed")
    assert crashed.outcome.error.startswith("slurm job ") and "\n" not in crashed.outcome.error
    assert run.manifest.status == "complete"


@pytest.mark.cluster
@needs_ray
def test_a_ray_worker_killed_mid_case_is_retried(tmp_path: Path, ray_cluster: str) -> None:
    """The killer dies on its first try of n=32; Ray runs the case again (max_retries 1) and every row is ok."""
    plugin = tmp_path / "killer.py"
    plugin.write_text(KILLER.format(marker=str(tmp_path / "killed"), always=False, seq_len=32), encoding="utf-8")
    path = config_file(tmp_path, "retried", implementations=["naive", "killer"])
    code, stderr = cli("run", str(path), "--out", str(tmp_path / "out"), "--plugin", str(plugin), "--executor", "ray")
    assert code == 0, stderr
    run = only_run(tmp_path / "out")
    assert (tmp_path / "killed").exists()  # the first try was killed
    assert sorted(key(row) for row in run.rows) == sorted({key(row) for row in run.rows})  # each row once
    assert len(run.rows) == 4 and all(row.status == "ok" for row in run.rows)


@pytest.mark.cluster
@needs_ray
def test_a_killed_ray_driver_leaves_a_folder_resume_finishes(tmp_path: Path, ray_cluster: str) -> None:
    """SIGKILL the driver after its first rows (the other cases still measuring), then ``--resume`` through Ray."""
    timing = {**TINY_TIMING, "min_run_time_s": 0.2, "max_run_time_s": 0.5}
    scenario = {**SCENARIO, "seq_len": [16, 24, 32]}  # three tasks on two CPUs: the third waits for a free one
    path = config_file(
        tmp_path, "driver", timing=timing, executor={"kind": "ray"}, scenarios=[scenario], implementations=IMPLS
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "mhabench", "run", str(path), "--out", str(out), "--ray-address", ray_cluster]
    child = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        run_dir = wait_for_rows(child, out, 2)  # a whole case: the Parquet file is rewritten at 2 rows
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    rows = load_run(run_dir).rows
    assert 2 <= len(rows) < 6, rows
    assert load_run(run_dir).manifest.status == "interrupted"
    # a row whose samples had not reached the Parquet file when the driver died is measured again, as in any run
    killed = [key(row) for row in rows if row.latency is not None and row.latency.times_ms]

    code, stderr = cli("run", "--resume", str(run_dir), "--ray-address", ray_cluster)
    assert code == 0, stderr
    run = load_run(run_dir)
    keys = [key(row) for row in run.rows]
    assert len(keys) == len(set(keys)) == 6 and keys[: len(killed)] == killed  # the first rows kept, none twice
    assert run.manifest.status == "complete" and len(run.manifest.resumed) == 1
    assert all(row.status == "ok" for row in run.rows)
