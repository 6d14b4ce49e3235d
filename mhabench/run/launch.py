"""How this process was started: alone, or as one rank of a ``torchrun`` launch, and whether that fits.

``torchrun --nproc-per-node T -m mhabench run CONFIG`` tells each copy who it is through
environment variables. Reading them needs no ``torch.distributed``, so the CLI can choose the
launcher and a single-process run can refuse a tensor-parallel sweep with the command that would run it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from mhabench.errors import InputError


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
