"""What tensor-parallel communication costs, and latency timed in lockstep across ranks.

A collective layer deadlocks as soon as two ranks make different numbers of calls, so the
tensor-parallel rows are timed here with blocks every rank agrees on, and the all-reduce of one
layer call is timed on its own (never inside the latency loop: its synchronizations slow it down).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from mhabench.impls.tensor_parallel import TPGroup, recording_all_reduces

# --- communication: what the all-reduce costs ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CommStats:
    """All-reduce time and volume of one layer call, and the bus bandwidth they imply.

    ``bus_bandwidth_gbps`` follows the convention of NCCL's performance notes: algorithm bandwidth
    is bytes / time, and for an all-reduce the bus bandwidth multiplies it by 2·(T−1)/T — the
    share of the data each link carries in a ring all-reduce — so the figure can be held against
    the link's rated speed whatever T is. NaN when nothing was communicated.
    """

    comm_ms: float
    allreduce_bytes: int
    bus_bandwidth_gbps: float


def bus_bandwidth_gbps(allreduce_bytes: int, comm_ms: float, world_size: int) -> float:
    """Ring all-reduce bus bandwidth, 2·(T−1)/T · bytes / time, in GB/s (NaN without traffic)."""
    if world_size < 2 or allreduce_bytes == 0 or comm_ms <= 0:
        return math.nan
    return 2 * (world_size - 1) / world_size * allreduce_bytes / (comm_ms / 1e3) / 1e9


class CommTracker:
    """Context manager: times and counts every all-reduce the tensor-parallel layers issue inside it.

    Each all-reduce is timed on the host around a synchronous collective; on CUDA the stream is
    synchronized before (so queued compute is not billed to communication) and after (so the
    transfer has finished). Those synchronizations slow the tracked calls down, so the runner
    measures communication in calls of its own, never inside the latency loop. The host time
    includes waiting for the slowest rank to arrive: load imbalance is part of what a layer pays.
    """

    def __init__(self) -> None:
        self.times_ms: list[float] = []
        self.allreduce_bytes = 0
        self._recording = recording_all_reduces(self)

    def __enter__(self) -> CommTracker:
        self._recording.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._recording.__exit__(*exc_info)

    def record(self, elapsed_ms: float, nbytes: int) -> None:
        self.times_ms.append(elapsed_ms)
        self.allreduce_bytes += nbytes

    def stats(self, world_size: int) -> CommStats:
        """Totals over everything tracked so far."""
        comm_ms = sum(self.times_ms)
        return CommStats(comm_ms, self.allreduce_bytes, bus_bandwidth_gbps(self.allreduce_bytes, comm_ms, world_size))


def measure_comm(call: Callable[[], object], tp: TPGroup, calls: int = 5) -> CommStats:
    """Communication of one layer call: the median over ``calls`` tracked calls (same count on every rank).

    The ranks meet before each tracked call, so its all-reduce waits only for the imbalance of that
    call, not for a lag left over from the calls before it.
    """
    per_call = []
    for _ in range(calls):
        _agree_max(0, tp)
        with CommTracker() as tracker:
            call()
        per_call.append(tracker.stats(tp.size))
    comm_ms = statistics.median(s.comm_ms for s in per_call)
    nbytes = per_call[-1].allreduce_bytes
    return CommStats(comm_ms, nbytes, bus_bandwidth_gbps(nbytes, comm_ms, tp.size))


# --- measuring in lockstep -------------------------------------------------------------------------


def _agree_max(value: int, tp: TPGroup) -> int:
    """The largest ``value`` over the ranks of ``tp`` (a CPU tensor: gloo carries it on every backend)."""
    if tp.group is None:
        return value
    tensor = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=tp.group)
    return int(tensor.item())


def _timed_s(call: Callable[[], object], device: torch.device, calls: int) -> float:
    _synchronize(device)
    start_s = time.perf_counter()
    for _ in range(calls):
        call()
    _synchronize(device)
    return time.perf_counter() - start_s


def lockstep_times_ms(
    call: Callable[[], object],
    device: torch.device,
    tp: TPGroup,
    *,
    warmup_runs: int,
    min_samples: int,
    min_run_time_s: float,
) -> tuple[list[float], int]:
    """Per-call latency samples and calls per sample, with every rank making the same calls.

    An adaptive timer lets each rank choose its own number of calls, and a collective layer
    deadlocks as soon as two ranks disagree. Here one probe call sizes a block of about
    ``min_run_time_s / min_samples``, the ranks agree on the largest block, and each times
    ``min_samples`` blocks.
    """
    for _ in range(warmup_runs):
        call()
    probe_s = max(_timed_s(call, device, 1), 1e-9)
    calls_per_sample = _agree_max(max(1, math.ceil(min_run_time_s / min_samples / probe_s)), tp)
    samples_ms = [_timed_s(call, device, calls_per_sample) / calls_per_sample * 1e3 for _ in range(min_samples)]
    return samples_ms, calls_per_sample


def gather_peak_bytes(local_peak_bytes: int, tp: TPGroup) -> list[int]:
    """Every rank's peak memory of one call, in rank order (each rank measures its own)."""
    if tp.group is None:
        return [local_peak_bytes]
    gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(tp.size)]
    dist.all_gather(gathered, torch.tensor([local_peak_bytes], dtype=torch.int64), group=tp.group)
    return [int(t.item()) for t in gathered]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
