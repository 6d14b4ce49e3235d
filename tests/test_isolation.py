"""Per-case isolation: a case whose child finishes, segfaults, hangs or cannot load its plugin; each
implementation ends as one row.

The children run real cases whose implementations come from a plugin file that only the child
loads, so each test exercises a real spawned child. A child imports torch (~3 s), so the four
children run in parallel, once per module.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from conftest import FIXED_PEAKS, TINY_TIMING
from plain_cases import plain_case

from mhabench.impls import available_implementations
from mhabench.results.schema import ResultRow
from mhabench.run import isolation
from mhabench.run.isolation import CaseJob, ChildSetup, _death, isolated_case
from mhabench.scenario import plugins
from mhabench.scenario.config import TimingConfig


@pytest.mark.parametrize(
    ("exit_code", "expected"),
    [
        (-signal.SIGKILL, "killed by SIGKILL (the kernel's OOM killer sends it when memory runs out)"),
        (-signal.SIGSEGV, "killed by SIGSEGV (an invalid memory access in native code)"),
        (-signal.SIGABRT, "killed by SIGABRT (Aborted)"),
        (3, "exited with code 3 without a result"),
        (0, "exited with code 0 without a result"),
    ],
)
def test_death_names_the_signal_or_exit_code(exit_code: int, expected: str) -> None:
    assert expected in _death(exit_code)


PLUGIN = """
import os, signal, time
from pathlib import Path

import torch
import mhabench


class Wrong(torch.nn.Module):
    def __init__(self, weights, heads, pattern):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)


class Segfault(Wrong):
    def forward(self, x):
        os.kill(os.getpid(), signal.SIGSEGV)


class Hang(Wrong):
    def forward(self, x):
        Path({pid_file!r}).write_text(str(os.getpid()), encoding="ascii")
        time.sleep(600)


def fine(weights, heads, pattern):
    return mhabench.build("naive", weights, heads, pattern)


for name, factory in (("iso_fine", fine), ("iso_wrong", Wrong), ("iso_segv", Segfault), ("iso_hang", Hang)):
    mhabench.register(name, description="test only", cost=None)(factory)
"""
CASE = plain_case(
    scenario="t", batch=1, seq_len=8, d_model=16, heads=2, causal=False, bias=False, dtype="float32", seed=0
)
HANG_TIMEOUT_S = 1.5


def job(names: list[str], plugin_files: tuple[str, ...]) -> CaseJob:
    setup = ChildSetup(allocator="steady", threads=1, plugin_files=plugin_files)
    return CaseJob(CASE, names, "cpu", "iso", FIXED_PEAKS, TimingConfig(**TINY_TIMING), 2, setup)


@dataclasses.dataclass(frozen=True)
class Children:
    rows: dict[str, list[ResultRow]]
    seconds: dict[str, float]
    hang_pid: int


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> Children:
    """Four cases, each in its own child, run at once (a spawned child imports torch: ~3 s each)."""
    folder = tmp_path_factory.mktemp("isolation")
    plugin = folder / "fakes.py"
    plugin.write_text(PLUGIN.format(pid_file=str(folder / "hang.pid")), encoding="utf-8")
    jobs = {
        "fine": (job(["iso_fine"], (str(plugin),)), 60.0),
        "segv": (job(["iso_wrong", "iso_segv", "iso_fine"], (str(plugin),)), 60.0),
        "hang": (job(["iso_hang"], (str(plugin),)), HANG_TIMEOUT_S),
        "no_plugin": (job(["iso_fine"], (str(folder / "gone.py"),)), 60.0),
    }

    def run(name: str) -> tuple[list[ResultRow], float]:
        start = time.monotonic()
        rows = list(isolated_case(*jobs[name]))
        return rows, time.monotonic() - start

    with ThreadPoolExecutor(len(jobs)) as pool:
        results = dict(zip(jobs, pool.map(run, jobs), strict=True))
    return Children(
        rows={name: rows for name, (rows, _) in results.items()},
        seconds={name: seconds for name, (_, seconds) in results.items()},
        hang_pid=int((folder / "hang.pid").read_text(encoding="ascii")),
    )


def outcomes(rows: list[ResultRow]) -> list[tuple[str, str]]:
    return [(row.case.impl, row.status) for row in rows]


def test_the_child_loads_the_plugin_and_sends_its_rows(children: Children) -> None:
    assert "iso_fine" not in available_implementations()  # registered in the child only
    (row,) = children.rows["fine"]
    assert (row.case.impl, row.status, row.case.repeat, row.case.run_id) == ("iso_fine", "ok", 2, "iso")
    assert row.latency is not None and row.latency.times_ms


def test_a_segfault_keeps_the_rows_sent_before_it(children: Children) -> None:
    rows = children.rows["segv"]
    assert outcomes(rows) == [("iso_wrong", "mismatch"), ("iso_segv", "crashed"), ("iso_fine", "crashed")]
    assert rows[1].outcome.error == rows[2].outcome.error
    assert "killed by SIGSEGV" in rows[1].outcome.error


def test_a_hang_becomes_timeout_and_the_child_is_killed(children: Children) -> None:
    (row,) = children.rows["hang"]
    assert (row.case.impl, row.status) == ("iso_hang", "timeout")
    assert f"not finished after {HANG_TIMEOUT_S:g} s" in row.outcome.error
    assert children.seconds["hang"] < 60  # killed after its timeout, not after its 600 s sleep
    with pytest.raises(ProcessLookupError):
        os.kill(children.hang_pid, 0)


def test_a_plugin_missing_in_the_child_is_an_error_row(children: Children) -> None:
    (row,) = children.rows["no_plugin"]
    assert (row.status, row.case.impl) == ("error", "iso_fine")
    assert row.outcome.error.startswith("PluginError: ") and "gone.py: no such plugin file" in row.outcome.error


def test_a_child_that_does_not_start_in_time_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "START_LIMIT_S", 0.01)  # killed long before it has imported torch
    rows = list(isolated_case(job(["naive", "fused"], ()), 60.0))
    assert outcomes(rows) == [("naive", "timeout"), ("fused", "timeout")]
    assert rows[0].outcome.error == "the child process did not start within 0.01 s"


def test_loaded_plugin_files_name_files_and_class_entries(tmp_path: Path, registry_snapshot: None) -> None:
    """What a child (or a resumed run) needs to register the same implementations under the same names."""
    module = tmp_path / "entries.py"
    module.write_text(PLUGIN.format(pid_file="unused") + "\nclass Loose(Wrong):\n    pass\n", encoding="utf-8")
    assert set(plugins.load_plugin(module)) == {"iso_fine", "iso_wrong", "iso_segv", "iso_hang"}
    assert plugins.register_class_entry("entries.py:Loose", tmp_path) == "Loose"
    recorded = plugins.loaded_plugin_files()
    assert recorded[-2:] == (str(module.resolve()), f"{module.resolve()}:Loose")
    plugins.load_plugin_files(recorded)  # loading them again is a no-op, not a duplicate registration
    assert plugins.loaded_plugin_files() == recorded


@pytest.mark.cuda
def test_a_cuda_case_runs_in_a_child_after_the_parent_initialised_cuda() -> None:
    """The reason for spawn: a forked child of a process with a CUDA context cannot use CUDA."""
    torch.ones(1, device="cuda")
    cuda_job = dataclasses.replace(job(["naive", "fused"], ()), device="cuda:0")
    rows = list(isolated_case(cuda_job, 300.0))
    assert outcomes(rows) == [("naive", "ok"), ("fused", "ok")]
    assert {row.case.device for row in rows} == {"cuda:0"}
