"""The process groups a sweep's tensor-parallel degrees split over: one per degree, the first ``size`` ranks."""

from __future__ import annotations

from collections.abc import Sequence

import torch.distributed as dist

from mhabench.impls.tensor_parallel import SINGLE_RANK, TPGroup


def tensor_parallel_groups(sizes: Sequence[int]) -> dict[int, TPGroup | None]:
    """One group per tensor-parallel degree of a sweep, made of the first ``size`` ranks.

    Every rank must call this with the same ``sizes`` (``new_group`` is collective). The value is
    None on ranks outside that degree's group: they skip those cases. Without a process group only
    degree 1 exists (:func:`~mhabench.run.launch.check_launch` refuses the others first).
    """
    if not (dist.is_available() and dist.is_initialized()):
        if max(sizes, default=1) > 1:
            raise ValueError(f"tensor_parallel {max(sizes)} needs a process group (init_distributed first)")
        return {1: SINGLE_RANK}
    rank, world_size = dist.get_rank(), dist.get_world_size()
    groups: dict[int, TPGroup | None] = {}
    for size in sorted(set(sizes)):
        if size == 1:
            groups[size] = SINGLE_RANK if rank == 0 else None
            continue
        group = dist.group.WORLD if size == world_size else dist.new_group(list(range(size)))
        groups[size] = TPGroup(size, rank, group) if rank < size else None
    return groups
