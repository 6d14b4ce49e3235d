"""Sharded sweeps: split a run's (case, implementation) pairs over N machines.

The cluster's own job arrays (Slurm ``--array``, a Kubernetes indexed Job) start the N shards;
mhabench only has to make every shard pick the same, balanced split without talking to the
others. ``mhabench merge`` puts the N run folders back together (:mod:`mhabench.results.merge`).

The split is longest-processing-time-first: pairs in decreasing predicted time, each to the shard
with the least predicted work so far. It is a greedy schedule whose longest shard is within 4/3
of the best possible one, and it is deterministic: ties are broken by the pair's key and the
lowest shard index, and the predicted times come from the cost model with fixed nominal peaks, not
from the machine, so every machine computes the same split from the same config.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from mhabench.errors import InputError
from mhabench.impls.registry import ImplSpec
from mhabench.results.manifest import Shard
from mhabench.scenario.cases import Case, expand_cases
from mhabench.scenario.config import RunConfig

Pair = tuple[str, str]
"""``(case key, implementation name)``: one (case, implementation) of a sweep, every repeat of it."""

# Nominal peaks for predicted times. Only ratios between pairs matter for balance, and using the
# same constants everywhere is what makes every machine compute the same split.
NOMINAL_PEAK_FLOPS_PER_S = 1e12
NOMINAL_PEAK_BYTES_PER_S = 100e9


def parse_shard(text: str) -> Shard:
    """``"I/N"`` with 0 ≤ I < N → :class:`Shard`; anything else is a one-line :class:`InputError`."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise InputError(f"--shard: expected I/N such as 0/4 (got {text!r})")
    index, count = int(match[1]), int(match[2])
    if count < 1 or index >= count:
        raise InputError(f"--shard: need 0 ≤ I < N and N ≥ 1 (got {text!r})")
    return Shard(index, count)


def predicted_pair_s(
    flops: float,
    bytes_moved: float,
    *,
    min_run_time_s: float,
    max_run_time_s: float,
    min_samples: int,
    untimed_calls: int = 4,
) -> float:
    """Predicted wall time of measuring one pair, from its cost-model FLOPs and bytes.

    One call takes the nominal roofline time, max(FLOPs / peak FLOP/s, bytes / peak B/s). The
    timer then runs for at least ``min_run_time_s`` and at most ``max_run_time_s``, longer than the
    minimum only when ``min_samples`` calls do not fit in it; the check, memory and warm-up calls
    (``untimed_calls``) come on top. So small pairs cost about the same each and large ones cost
    by their size, which is why balancing by count or by FLOPs alone would both be wrong.
    """
    call_s = max(flops / NOMINAL_PEAK_FLOPS_PER_S, bytes_moved / NOMINAL_PEAK_BYTES_PER_S)
    timed_s = min(max(min_run_time_s, min_samples * call_s), max_run_time_s)
    return timed_s + untimed_calls * call_s


def assign_shards(predicted_s: Mapping[Pair, float], count: int) -> list[list[Pair]]:
    """Longest-processing-time-first: each pair, slowest first, to the least loaded shard.

    Ties between pairs go by their key, ties between shards to the lowest index, so the result
    depends only on the predicted times. Each shard's pairs are returned sorted by key.
    """
    if count < 1:
        raise ValueError(f"shard count must be at least 1 (got {count})")
    loads = [(0.0, index) for index in range(count)]  # a heap of (predicted seconds, shard index)
    shards: list[list[Pair]] = [[] for _ in range(count)]
    for pair in sorted(predicted_s, key=lambda p: (-predicted_s[p], p)):
        load, index = heapq.heappop(loads)
        shards[index].append(pair)
        heapq.heappush(loads, (load + predicted_s[pair], index))
    return [sorted(pairs) for pairs in shards]


def shard_pairs(predicted_s: Mapping[Pair, float], shard: Shard) -> set[Pair]:
    """The pairs ``shard`` runs; the runner keeps its usual order and skips the others."""
    return set(assign_shards(predicted_s, shard.count)[shard.index])


def predicted_times(config: RunConfig, device: torch.device, specs: Sequence[ImplSpec]) -> dict[Pair, float]:
    """Predicted seconds of every (case, implementation) of ``config``, from each one's cost model.

    An implementation without a cost model (a bare plugin) is priced as a call of no work: the
    timer's minimum plus nothing. The untimed calls are the warm-up runs, the checked call and the
    memory call.
    """
    timing = config.timing
    predicted = {}
    for case in expand_cases(config, device):
        for spec in specs:
            cost = spec.cost(case.workload()) if spec.cost else None
            predicted[(case.case_id, spec.name)] = predicted_pair_s(
                cost.flops if cost else 0,
                cost.bytes_moved if cost else 0,
                min_run_time_s=timing.min_run_time_s,
                max_run_time_s=timing.max_run_time_s,
                min_samples=timing.min_samples,
                untimed_calls=timing.warmup_runs + 2,
            )
    return predicted


def shard_selector(
    config: RunConfig, device: torch.device, specs: Sequence[ImplSpec], shard: Shard
) -> Callable[[Case, str, int], bool]:
    """``select`` for the runner: does ``shard`` measure (case, implementation name, repeat)?

    Every repeat of a pair goes to the same shard, so ``--repeat N`` compares runs on one machine
    and a merged run holds each (case, implementation, repeat) once.
    """
    chosen = shard_pairs(predicted_times(config, device, specs), shard)
    return lambda case, impl, repeat: (case.case_id, impl) in chosen


def folder_name(
    config_name: str | None, shard_entry: Mapping[str, Any] | None, replicate_entry: Mapping[str, Any] | None = None
) -> str:
    """A run folder's name: the config's, with ``-shard-I-of-N`` for a shard so the shards sort together, and
    ``-replicate-I-of-N`` for one process of a replicated run, so two that start in the same second differ."""
    suffix = f"-shard-{shard_entry['index']}-of-{shard_entry['count']}" if shard_entry else ""
    if replicate_entry:
        suffix += f"-replicate-{replicate_entry['index']}-of-{replicate_entry['count']}"
    return (config_name or "run") + suffix
