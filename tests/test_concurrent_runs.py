"""Two ``mhabench run`` processes started together into one ``--out``, with the same run name and the
same start second: both succeed, each in its own run folder with its own complete rows.

The clock is frozen in both children (``runner.new_run_dir`` gets a fixed time), so the run ids
collide for certain rather than when the two starts happen to share a second; the roofline peaks
are fixed too, which saves each child the second it takes to measure them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from conftest import TINY_TIMING

from mhabench.results.store import load_run

FROZEN_PREFIX = "20300101T000000Z-pair"
FROZEN_CLOCK = """
import datetime as dt
import sys

from mhabench import cli
from mhabench.results import store as results
from mhabench.run import runner
from mhabench.measure.peaks import DevicePeaks

frozen = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
runner.new_run_dir = lambda root, name, now: results.new_run_dir(root, name, frozen)
runner.device_peaks = lambda device, dtype: DevicePeaks(peak_tflops=1.0, peak_gbps=20.0, source="test-fixed")
sys.argv = ["mhabench", *sys.argv[1:]]
cli.main()
"""
CONFIG = {
    "name": "pair",
    "device": "cpu",
    "implementations": ["naive", "fused"],
    "timing": dict(TINY_TIMING),
    "scenarios": [{"name": "t", "seq_len": [8, 16], "d_model": 16, "heads": 2}],
}


def test_two_runs_in_the_same_second_get_separate_complete_folders(tmp_path: Path) -> None:
    config = tmp_path / "pair.yaml"
    config.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    command = [sys.executable, "-c", FROZEN_CLOCK, "run", str(config), "--out", str(tmp_path / "out")]
    children = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in "ab"]
    for child in children:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr.decode()[-2000:]

    folders = sorted(path.name for path in (tmp_path / "out").iterdir())
    assert folders == [FROZEN_PREFIX, f"{FROZEN_PREFIX}-1"]  # the same second: the second folder is suffixed
    writers = set()
    for name in folders:
        run = load_run(tmp_path / "out" / name)
        assert (run.manifest.run_id, run.manifest.status) == (name, "complete")
        assert set(run.frame["run_id"]) == {name}
        assert len(run.frame) == 4 and not run.frame.duplicated(["case_id", "impl"]).any()
        assert set(run.frame["status"]) == {"ok"}
        writers.add(run.manifest.pid)
    assert writers == {child.pid for child in children}  # each folder was written by its own process
