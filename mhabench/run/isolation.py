"""Run one case of a sweep in a child process (``isolation: process``), so that a hang, a segfault or
the OOM killer costs one case, not the sweep.

The child is started with multiprocessing's ``spawn`` context, never ``fork``: by the time a case
runs, the parent has started torch's intra-op thread pool (and on a GPU machine initialised CUDA),
and a forked child inherits that state half-copied: a thread pool whose threads do not exist (a
deadlock at the first parallel op) and a CUDA context that cannot be used at all. ``spawn`` starts
a fresh interpreter instead; it costs an import of torch per case.

The child applies the run's process settings, loads its plugins, says it is ready, and sends each
row back as soon as it exists, so a case that dies half-way keeps the rows it finished.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import signal
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

import torch

from mhabench.errors import shorten
from mhabench.impls import get_spec
from mhabench.measure.allocator import apply_process_settings
from mhabench.results.schema import Outcome, ResultRow
from mhabench.run.case import identity, run_case
from mhabench.scenario import plugins

if TYPE_CHECKING:
    from mhabench.measure.peaks import DevicePeaks
    from mhabench.run.ncu_profile import CounterSettings
    from mhabench.scenario.cases import Case
    from mhabench.scenario.config import EnergyConfig, TimingConfig

ERROR_LIMIT = 300
"""Longest error text kept from a child: one readable line."""
EXIT_GRACE_S = 5.0
"""How long a child that has answered may take to exit before it is killed."""
START_LIMIT_S = 120.0
"""How long a child may take to start (import torch, load plugins) before it counts as hung;
``case_timeout_s`` starts once it is ready, so the timeout is the case's own time."""
_SIGNAL_NOTES = {
    signal.SIGKILL: "the kernel's OOM killer sends it when memory runs out",
    signal.SIGSEGV: "an invalid memory access in native code",
}


@dataclasses.dataclass(frozen=True)
class ChildSetup:
    """What the parent's run applied to itself, for the child to apply before it measures anything."""

    allocator: str
    threads: int | None
    plugin_files: tuple[str, ...] = ()
    """``plugins.loaded_plugin_files()``: a fresh interpreter has only the built-in implementations."""


@dataclasses.dataclass(frozen=True)
class CaseJob:
    """One case for a child process: what :func:`mhabench.run.case.run_case` takes, in picklable form."""

    case: Case
    impl_names: list[str]
    device: str
    """Canonical (``cpu``, ``cuda:0``): a bare ``cuda`` could mean another GPU in the child."""
    run_id: str
    peaks: DevicePeaks
    timing: TimingConfig
    repeat: int
    setup: ChildSetup
    memory_guard: bool = True
    energy: EnergyConfig | None = None
    counters: CounterSettings | None = None


def isolated_case(job: CaseJob, timeout_s: float) -> Iterator[ResultRow]:
    """The rows of ``job``'s case, measured in a spawned child and yielded as the child produces them.

    The parent never raises for what happens in the child. A child still busy ``timeout_s`` seconds
    after it started the case is killed, and every implementation without a row gets a ``timeout``
    row; a child that dies (segfault, the OOM killer, ``os._exit``) leaves ``crashed`` rows naming
    the signal or exit code; an exception outside the rows (a plugin that no longer imports) leaves
    ``error`` rows.
    """
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_case_child, args=(sender, job), daemon=True)
    done: set[str] = set()
    try:
        child.start()
        sender.close()  # the parent keeps only the receiving end, so a dead child reads as EOF
        for kind, payload in _messages(child, receiver, timeout_s):
            if kind == "row":
                done.add(payload.case.impl)
                yield payload
            elif kind != "done":
                yield from _rows_not_produced(job, done, Outcome(kind, shorten(payload, ERROR_LIMIT)))
    finally:
        _reap(child)
        receiver.close()


def _messages(
    child: multiprocessing.process.BaseProcess, receiver: Connection, timeout_s: float
) -> Iterator[tuple[str, Any]]:
    """``("row", row)`` per row, then ``("done", None)``, ``("error", line)``, ``("timeout", line)`` or
    ``("crashed", line)``. The deadline is :data:`START_LIMIT_S` until the child is ready, then ``timeout_s``."""
    deadline, late = time.monotonic() + START_LIMIT_S, f"the child process did not start within {START_LIMIT_S:g} s"
    while True:
        if not receiver.poll(max(0.0, deadline - time.monotonic())):
            child.kill()
            yield "timeout", late
            return
        try:
            kind, payload = receiver.recv()
        except (EOFError, OSError):  # the child died before it finished the case
            _reap(child)
            yield "crashed", _death(child.exitcode)
            return
        if kind == "ready":
            deadline = time.monotonic() + timeout_s
            late = f"not finished after {timeout_s:g} s (case_timeout_s); the child process was killed"
            continue
        yield kind, payload
        if kind != "row":
            return


def _rows_not_produced(job: CaseJob, done: set[str], outcome: Outcome) -> Iterator[ResultRow]:
    """``outcome`` for every implementation of the case that has no row yet."""
    device = torch.device(job.device)
    for name in job.impl_names:
        if name not in done:
            yield ResultRow(identity(job.run_id, job.case, name, device, job.repeat), outcome)


def _case_child(sender: Connection, job: CaseJob) -> None:
    """Runs in the child: settings and plugins first (before anything allocates), ``("ready", None)``,
    one ``("row", row)`` per row as it exists, then ``("done", None)``, or ``("error", line)``."""
    try:
        apply_process_settings(job.setup.allocator, job.setup.threads)
        plugins.load_plugin_files(job.setup.plugin_files)
        specs = [get_spec(name) for name in job.impl_names]
        device = torch.device(job.device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        sender.send(("ready", None))
        for row in run_case(
            job.case,
            specs,
            device,
            job.run_id,
            job.peaks,
            job.timing,
            repeat=job.repeat,
            guard=job.memory_guard,
            energy=job.energy,
            counters=job.counters,
        ):
            sender.send(("row", row))
        message: tuple[str, Any] = ("done", None)
    except BaseException as exc:  # the child's only job is to report; KeyboardInterrupt included
        message = ("error", _one_line(exc))
    sender.send(message)
    sender.close()


def _reap(child: multiprocessing.process.BaseProcess) -> None:
    """Let a child that answered exit on its own; kill one that did not (timeout, Ctrl-C in the parent)."""
    if child.pid is None:  # never started
        return
    child.join(EXIT_GRACE_S)
    if child.is_alive():
        child.kill()
        child.join()


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


def _one_line(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return shorten(f"{type(exc).__name__}: {first_line}".rstrip(": "), ERROR_LIMIT)
