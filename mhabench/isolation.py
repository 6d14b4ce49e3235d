"""Run one function in a child process, so that a hang, a segfault or the OOM killer costs one case,
not the sweep.

The child is started with multiprocessing's ``spawn`` context, never ``fork``: by the time a case
runs, the parent has started torch's intra-op thread pool (and on a GPU machine initialised CUDA),
and a forked child inherits that state half-copied: a thread pool whose threads do not exist (a
deadlock at the first parallel op) and a CUDA context that cannot be used at all. ``spawn`` starts
a fresh interpreter instead; it costs an import of the function's module (and so of torch) per call.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Literal

from mhabench.errors import shorten

IsolatedStatus = Literal["ok", "timeout", "crashed", "error"]
ERROR_LIMIT = 300
"""Longest error text kept from a child: one readable line."""
EXIT_GRACE_S = 5.0
"""How long a child that has answered may take to exit before it is killed."""
_SIGNAL_NOTES = {
    signal.SIGKILL: "the kernel's OOM killer sends it when memory runs out",
    signal.SIGSEGV: "an invalid memory access in native code",
}


@dataclasses.dataclass(frozen=True)
class IsolatedResult:
    """What became of one isolated call: ``value`` when ``ok``, else ``error`` says why in one line."""

    status: IsolatedStatus
    value: Any = None
    error: str = ""


def run_isolated(fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float) -> IsolatedResult:
    """``fn(*args)`` in a spawned child, killed after ``timeout_s`` seconds.

    ``fn`` must be a top-level function and ``args`` and its return value picklable (they cross a
    process boundary); a ``fn`` that cannot be pickled raises here, in the parent, as a programming
    error. Statuses: ``ok`` (``value`` is the return value), ``timeout`` (the child was killed),
    ``crashed`` (the child died without answering: the signal or exit code is named) and ``error``
    (``fn`` raised: its type and message).
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(sender, fn, args), daemon=True)
    try:
        child.start()
        sender.close()  # the parent keeps only the receiving end, so a dead child reads as EOF
        return _await(child, receiver, timeout_s)
    finally:
        _reap(child)
        receiver.close()


def _reap(child: multiprocessing.process.BaseProcess) -> None:
    """Let a child that answered exit on its own; kill one that did not (timeout, Ctrl-C in the parent)."""
    if child.pid is None:  # never started
        return
    child.join(EXIT_GRACE_S)
    if child.is_alive():
        child.kill()
        child.join()


def _await(child: multiprocessing.process.BaseProcess, receiver: Connection, timeout_s: float) -> IsolatedResult:
    if not receiver.poll(timeout_s):
        child.kill()
        child.join()
        return IsolatedResult("timeout", error=f"no result after {timeout_s:g} s; the child process was killed")
    try:
        status, payload = receiver.recv()
    except (EOFError, OSError):  # the child died before it could answer
        child.join()
        return IsolatedResult("crashed", error=_death(child.exitcode))
    return IsolatedResult("ok", value=payload) if status == "ok" else IsolatedResult("error", error=payload)


def _death(exit_code: int | None) -> str:
    """``killed by SIGSEGV (...)``, or the exit code of a child that exited without answering."""
    if exit_code is None or exit_code >= 0:
        return f"the child process exited with code {exit_code} without a result"
    try:
        killer = signal.Signals(-exit_code)
    except ValueError:
        return f"the child process was killed by signal {-exit_code}"
    note = _SIGNAL_NOTES.get(killer) or signal.strsignal(killer) or ""
    return f"the child process was killed by {killer.name}" + (f" ({note})" if note else "")


def _child_main(sender: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Runs in the child: one message, ``("ok", value)`` or ``("error", line)``, then exit."""
    try:
        message: tuple[str, Any] = ("ok", fn(*args))
    except BaseException as exc:  # the child's only job is to report; KeyboardInterrupt included
        message = ("error", _one_line(exc))
    try:
        sender.send(message)
    except Exception as exc:  # e.g. a return value that cannot be pickled
        sender.send(("error", _one_line(exc, "the result could not be sent back: ")))
    sender.close()


def _one_line(exc: BaseException, prefix: str = "") -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return shorten(f"{prefix}{type(exc).__name__}: {first_line}".rstrip(": "), ERROR_LIMIT)
