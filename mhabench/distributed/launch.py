"""Joining a ``torchrun`` launch: read its environment, start the process group, agree on errors.

``torchrun --nproc-per-node T -m mhabench run CONFIG`` starts T copies of mhabench and tells each
who it is through environment variables. Everything here is deliberately thin over
``torch.distributed``: we add the checks a user needs as one line (no launch, wrong world size,
heads that do not split) and the rule that makes a failed launch end on every rank.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist

from mhabench.errors import InputError, MhabenchError
from mhabench.run.launch import LaunchEnv

# --- the process group ------------------------------------------------------------------------


def backend_for(device_type: str) -> str:
    """NCCL between GPUs, gloo between CPU processes: the backends each device is built for.

    On CUDA the group also gets a gloo side for CPU tensors, so the small error-flag collectives
    of :func:`agree_on_errors` never depend on a GPU being usable.
    """
    return "cpu:gloo,cuda:nccl" if device_type == "cuda" else "gloo"


def backend_name(device_type: str) -> str:
    """The backend that carries the all-reduce of the attention output (the ``backend`` column)."""
    return "nccl" if device_type == "cuda" else "gloo"


def init_distributed(launch: LaunchEnv, device_type: str, timeout_s: float = 600.0) -> torch.device:
    """Join the process group of ``launch``; return the device this rank computes on.

    On CUDA each rank takes the GPU of its ``LOCAL_RANK`` on its node. ``MASTER_ADDR`` and
    ``MASTER_PORT`` are read by torch itself (``env://``).
    """
    device = torch.device("cpu")
    if device_type == "cuda":
        device = torch.device("cuda", launch.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(
            backend_for(device_type),
            init_method="env://",
            rank=launch.rank,
            world_size=launch.world_size,
            timeout=dt.timedelta(seconds=timeout_s),
        )
    return device


def shutdown_distributed() -> None:
    """Leave the process group (a no-op outside one) while nothing else still holds it.

    A process group that outlives ``destroy_process_group`` is destroyed during interpreter
    teardown, where gloo aborts the process ("terminate called without an active exception").
    Collectives run under a ``TorchDispatchMode`` (the CPU memory tracker) leave the group in
    reference cycles, so the garbage collector runs first.
    """
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


# --- ending every rank together ---------------------------------------------------------------


def agree_on_errors(check: Callable[[], None]) -> None:
    """Run ``check`` on every rank; if it raised an :class:`InputError` on any rank, raise on all.

    Call it before any collective that follows rank-dependent work (rank 0 creating the run
    folder, each rank claiming its GPU): a rank that failed alone would otherwise leave the others
    waiting in their next collective until the timeout. The message is the one of the lowest
    failing rank, so rank 0 can print it even when it did not fail itself. Without a process
    group this is just ``check()``.
    """
    error: InputError | None = None
    try:
        check()
    except InputError as exc:
        error = exc
    if not (dist.is_available() and dist.is_initialized()):
        if error is not None:
            raise error
        return
    rank, world_size = dist.get_rank(), dist.get_world_size()
    first_failed = torch.tensor([rank if error is not None else world_size], dtype=torch.int64)
    dist.all_reduce(first_failed, op=dist.ReduceOp.MIN)
    source = int(first_failed.item())
    if source == world_size:
        return
    message = [str(error) if error is not None else None]
    dist.broadcast_object_list(message, src=source, device=torch.device("cpu"))
    if error is not None:
        raise error
    raise InputError(str(message[0]))


@contextlib.contextmanager
def errors_end_every_rank(launch: LaunchEnv | None) -> Iterator[None]:
    """Leave the process group on the way out; on an mhabench error only rank 0 raises it.

    Rank 0 (or a process started without torchrun) lets the error reach the CLI, which prints
    one line and exits with the error's code. Every other rank exits with the same code and
    prints nothing, so a T-rank launch shows the message once.
    """
    try:
        yield
    except MhabenchError as exc:
        if launch is None or launch.is_rank0:
            raise
        raise SystemExit(exc.exit_code) from None
    finally:
        shutdown_distributed()
