"""Joining a ``torchrun`` launch: read its environment, start the process group, agree on errors.

``torchrun --nproc-per-node T -m mhabench run CONFIG`` starts T copies of mhabench and tells each
who it is through environment variables. Everything here is deliberately thin over
``torch.distributed``: we add the checks a user needs as one line (no launch, wrong world size,
heads that do not split) and the rule that makes a failed launch end on every rank.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import torch
import torch.distributed as dist

from mhabench.errors import ConfigError, InputError, MhabenchError


@dataclasses.dataclass(frozen=True)
class LaunchEnv:
    """Who this process is in a ``torchrun`` launch (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``)."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str

    @property
    def is_rank0(self) -> bool:
        """Rank 0 is the one that writes the run and prints errors."""
        return self.rank == 0


def _int_variable(environ: Mapping[str, str], name: str) -> int:
    text = environ.get(name, "")
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{name}: expected a whole number from torchrun (got {text!r})") from None
    if value < 0:
        raise InputError(f"{name}: must not be negative (got {value})")
    return value


def launch_env(environ: Mapping[str, str] | None = None) -> LaunchEnv | None:
    """This process's place in a ``torchrun`` launch, or None when it was started on its own.

    A launch is recognised by ``RANK`` and ``WORLD_SIZE``; torchrun always sets both.
    """
    environ = os.environ if environ is None else environ
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    rank, world_size = _int_variable(environ, "RANK"), _int_variable(environ, "WORLD_SIZE")
    if world_size < 1 or rank >= world_size:
        raise InputError(f"RANK: rank {rank} does not fit a world of WORLD_SIZE {world_size}")
    local_rank = _int_variable(environ, "LOCAL_RANK") if "LOCAL_RANK" in environ else rank
    return LaunchEnv(rank, world_size, local_rank, environ.get("MASTER_ADDR", "127.0.0.1"))


# --- checks that every rank makes on the same inputs, before any communication --------------------


def torchrun_command(tensor_parallel: int, config_path: str) -> str:
    """The launch a ``tensor_parallel`` > 1 config needs, spelled out for the error message."""
    return f"torchrun --nproc-per-node {tensor_parallel} -m mhabench run {config_path}"


def check_launch(tensor_parallel: Sequence[int], launch: LaunchEnv | None, config_path: str) -> None:
    """The processes launched must be exactly the largest ``tensor_parallel`` of the config.

    Smaller degrees of the same sweep run on the first ranks while the others wait; more processes
    than the largest degree would only idle, so they are refused too.
    """
    largest = max(tensor_parallel, default=1)
    world_size = launch.world_size if launch else 1
    if largest > 1 and launch is None:
        raise InputError(
            f"{config_path}: tensor_parallel: {largest} needs one process per rank; "
            f"launch it with `{torchrun_command(largest, config_path)}`"
        )
    if world_size != largest and largest == 1:
        raise InputError(
            f"{config_path}: tensor_parallel: every value is 1 but torchrun started WORLD_SIZE {world_size} "
            f"processes; run it without torchrun: `mhabench run {config_path}`"
        )
    if world_size != largest:
        raise InputError(
            f"{config_path}: tensor_parallel: the largest value is {largest} but torchrun started "
            f"WORLD_SIZE {world_size} processes; use `{torchrun_command(largest, config_path)}`"
        )


def divisibility_problem(heads: int, kv_heads: int, tensor_parallel: int) -> str | None:
    """Why ``heads``/``kv_heads`` cannot be split over ``tensor_parallel`` ranks, or None.

    Query heads must split evenly. Key/value heads either split evenly too, or — when there are
    fewer of them than ranks — each is replicated on ``tensor_parallel / kv_heads`` ranks, which
    needs ``kv_heads`` to divide ``tensor_parallel``. Returned as text so a pydantic validator can
    raise it with the field's path.
    """
    if heads % tensor_parallel:
        return f"heads {heads} is not divisible by tensor_parallel {tensor_parallel}"
    if kv_heads >= tensor_parallel and kv_heads % tensor_parallel:
        return f"kv_heads {kv_heads} is not divisible by tensor_parallel {tensor_parallel}"
    if kv_heads < tensor_parallel and tensor_parallel % kv_heads:
        return (
            f"kv_heads {kv_heads} does not divide tensor_parallel {tensor_parallel} "
            "(fewer K/V heads than ranks are replicated, so each must cover a whole number of ranks)"
        )
    return None


def check_divisible(heads: int, kv_heads: int, tensor_parallel: int) -> None:
    """:func:`divisibility_problem` as a :class:`ConfigError`."""
    problem = divisibility_problem(heads, kv_heads, tensor_parallel)
    if problem:
        raise ConfigError(f"tensor_parallel: {problem}")


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
