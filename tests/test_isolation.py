"""Per-case isolation: a child that returns, raises, segfaults or hangs; each ends as one status.

The children below are top-level functions (spawn pickles them by name) and import nothing heavy.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mhabench.isolation import IsolatedResult, _death, run_isolated

TIMEOUT_S = 60.0  # generous: a spawned child imports mhabench (and torch) before running


def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b, "pid": os.getpid()}


def fail(message: str) -> None:
    raise ValueError(f"{message}\nsecond line that must not reach the report")


def segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(pid_file: str) -> None:
    Path(pid_file).write_text(str(os.getpid()), encoding="ascii")
    time.sleep(600)


def unpicklable_result() -> object:
    return lambda: None


def cuda_sum(n: int) -> float:
    import torch

    return float(torch.ones(n, device="cuda").sum())


def cuda_out_of_memory() -> None:
    import torch

    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")  # a petabyte


def test_value_comes_back_from_another_process() -> None:
    result = run_isolated(add, (2, 3), TIMEOUT_S)
    assert (result.status, result.error) == ("ok", "")
    assert result.value["sum"] == 5
    assert result.value["pid"] != os.getpid()


def test_exception_becomes_one_error_line() -> None:
    result = run_isolated(fail, ("boom",), TIMEOUT_S)
    assert (result.status, result.value) == ("error", None)
    assert result.error == "ValueError: boom"


def test_segfault_is_crashed_and_names_the_signal() -> None:
    result = run_isolated(segfault, (), TIMEOUT_S)
    assert result.status == "crashed"
    assert "SIGSEGV" in result.error


def test_hang_is_killed_after_the_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    start = time.monotonic()
    result = run_isolated(hang, (str(pid_file),), 6.0)
    assert time.monotonic() - start < 20
    assert result.status == "timeout"
    assert "6 s" in result.error
    with pytest.raises(ProcessLookupError):  # the child is gone, not left running
        os.kill(int(pid_file.read_text(encoding="ascii")), 0)


def test_result_that_cannot_be_pickled_is_an_error_not_a_hang() -> None:
    result = run_isolated(unpicklable_result, (), TIMEOUT_S)
    assert result.status == "error"
    assert result.error.startswith("the result could not be sent back: ")


def test_local_function_is_refused_in_the_parent() -> None:
    def local() -> None:
        pass

    with pytest.raises(Exception, match=r"pickle|local"):
        run_isolated(local, (), TIMEOUT_S)


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


@pytest.mark.cuda
def test_child_uses_cuda_after_the_parent_initialised_it() -> None:
    """The reason for spawn: a forked child of a process with a CUDA context cannot use CUDA."""
    import torch

    torch.ones(1, device="cuda")
    assert run_isolated(cuda_sum, (1000,), TIMEOUT_S) == IsolatedResult("ok", 1000.0)
    result = run_isolated(cuda_out_of_memory, (), TIMEOUT_S)
    assert result.status == "error"
    assert result.error.startswith("OutOfMemoryError: CUDA out of memory")
    assert "\n" not in result.error
