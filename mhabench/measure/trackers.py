"""Measurements as context managers that return value objects (optimum-benchmark's tracker pattern).

``with Tracker(...) as t: call()`` then ``t.result()``: a (partial) group of
:mod:`mhabench.results.schema`, which :meth:`~mhabench.results.schema.ResultRow.with_groups` merges into
the row. A new measurement is one schema class (or field) plus the tracker that fills it;
:mod:`mhabench.run.case` enters the trackers around the checked call and the one extra CUDA call.

- :class:`DispatchTracker`: the aten ops one call dispatched (which SDPA backend ran, how many ops,
  how many tensor storages they allocated), on the CPU the peak of live tensor storage
  (:class:`mhabench.measure.memory.LiveStorageTracker`), and the FLOPs and bytes those ops add up
  to (:class:`mhabench.measure.op_counts.OpCounter`), all in one pass.
- :class:`CudaMemoryTracker`: the caching allocator's peak above what was allocated before.
- :class:`Stopwatch`: wall time of the enclosed block, device work included.
"""

from __future__ import annotations

import math
import time
from types import TracebackType
from typing import TYPE_CHECKING

import torch

from mhabench.measure.memory import LiveStorageTracker, sdpa_backend, tracker_method
from mhabench.measure.op_counts import OpCounter, OpCounts
from mhabench.results.schema import Dispatch, Memory

if TYPE_CHECKING:
    from typing_extensions import Self


class DispatchTracker:
    """Ops dispatched by the enclosed calls, the CPU peak of the storages they created, their counts."""

    def __init__(self) -> None:
        self._counter = OpCounter()
        self._storage = LiveStorageTracker(observers=[self._counter.observe])

    def __enter__(self) -> Self:
        self._storage.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._storage.__exit__(kind, exc, tb)

    @property
    def ops(self) -> set[str]:
        return self._storage.ops

    def result(self) -> Dispatch:
        return Dispatch(
            sdpa_backend=sdpa_backend(self._storage.ops),
            ops_per_call=self._storage.op_calls,
            allocations_per_call=self._storage.allocations,
        )

    def cpu_memory(self) -> Memory:
        """The peak of live tensor storage: the CPU's peak memory (CUDA's comes from :class:`CudaMemoryTracker`)."""
        return Memory(peak_memory_bytes=self._storage.peak_bytes, memory_method=tracker_method(self._storage.ops))

    def counts(self) -> OpCounts:
        """FLOPs and bytes of the dispatched ops (docs/cost-model.md, "Counted versus modelled")."""
        return self._counter.result()


class CudaMemoryTracker:
    """The CUDA caching allocator's peak during the block, minus what was allocated on entry."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._baseline = 0
        self._peak = math.nan

    def __enter__(self) -> Self:
        torch.cuda.synchronize(self.device)
        self._baseline = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        torch.cuda.synchronize(self.device)
        self._peak = torch.cuda.max_memory_allocated(self.device) - self._baseline

    def result(self) -> Memory:
        return Memory(peak_memory_bytes=self._peak, memory_method="cuda_allocator")


class Stopwatch:
    """Seconds spent in the block, synchronizing ``device`` at the end so GPU work counts."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._start_s = 0.0
        self.seconds = math.nan

    def __enter__(self) -> Self:
        self._start_s = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.seconds = time.perf_counter() - self._start_s
