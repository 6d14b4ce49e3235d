"""GPU latency as the GPU sees it: CUDA events around each call, a cold L2, optional CUDA graphs.

Host-clock timing of back-to-back calls measures the launch rate when a call is short (an attention
layer at the default sizes is ~15 µs of GPU work on an H100), and repeated calls find their working
set in the 50–60 MB L2, so bandwidth can read above HBM's. Here, as in the best GPU benchmarks:

- each call is bracketed by two CUDA events on the device's current stream; their elapsed time is
  the call's device time;
- before each timed call, unless ``flush_l2`` is off, a buffer of at least twice the L2 is
  overwritten, so the call starts with a cold cache; the flush runs before the start event, so its
  own time is not counted, and while the GPU flushes the host queues the call, which hides launch
  latency the way a real pipeline would;
- every call runs under ``torch.cuda.device(device)``, so ``cuda:1`` is timed on its own stream and
  synchronized on its own device;
- with ``cuda_graphs`` the call is captured once into a CUDA graph and the graph is replayed, which
  removes the host's launch overhead from the measurement altogether;
- a host-timed figure per call (launch, run, synchronize) is kept beside it, so launch overhead is
  visible as the difference;
- the number of calls comes from an estimate of one call's device time (:func:`calls_for`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from mhabench.errors import UnsupportedError
from mhabench.failures import one_line

FALLBACK_L2_BYTES = 64 * 2**20  # torch builds that do not report L2_cache_size
FLUSH_MIN_BYTES = 256 * 2**20  # like triton.testing.do_bench: comfortably above any L2 up to B200's 126 MB
FLUSH_L2_MULTIPLE = 2
MAX_CALLS = 10_000  # two events per call: bounded so a sub-microsecond call cannot exhaust memory
HOST_CALLS = 20  # host-timed calls (each synchronized): enough for a stable median
ESTIMATE_CALLS = 3


@dataclasses.dataclass(frozen=True)
class CudaTimes:
    """Per-call times of one timed batch of calls."""

    device_ms: tuple[float, ...]
    """CUDA-event time of each call, the flush excluded: the headline latency."""
    host_ms: tuple[float, ...]
    """Wall-clock time of a synchronous call (launch + run + synchronize): device time plus overhead."""
    flush_l2: bool
    cuda_graphs: bool
    flush_bytes: int
    """Bytes overwritten before each timed call (0 when ``flush_l2`` is off)."""

    @property
    def median_device_ms(self) -> float:
        return statistics.median(self.device_ms)

    @property
    def median_host_ms(self) -> float:
        return statistics.median(self.host_ms) if self.host_ms else math.nan

    @property
    def launch_overhead_ms(self) -> float:
        """Host minus device median: what launching and synchronizing one call adds."""
        return self.median_host_ms - self.median_device_ms


def l2_cache_bytes(device: torch.device) -> int:
    """The device's L2 size as torch reports it (``FALLBACK_L2_BYTES`` when it does not)."""
    size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return int(size) if size and size > 0 else FALLBACK_L2_BYTES


def flush_bytes_for(l2_bytes: int) -> int:
    """Size of the buffer overwritten before each call: ≥ 2× L2, and never below ``FLUSH_MIN_BYTES``."""
    return max(FLUSH_L2_MULTIPLE * l2_bytes, FLUSH_MIN_BYTES)


def calls_for(estimate_ms: float, min_run_time_s: float, max_run_time_s: float, min_calls: int) -> int:
    """How many calls to time, from one call's estimated device time.

    Enough calls to fill ``min_run_time_s`` and at least ``min_calls`` of them, unless that would
    exceed ``max_run_time_s``; never fewer than one nor more than ``MAX_CALLS``.
    """
    estimate_ms = max(estimate_ms, 1e-4)
    wanted = max(math.ceil(min_run_time_s * 1e3 / estimate_ms), min_calls)
    affordable = max(math.floor(max_run_time_s * 1e3 / estimate_ms), 1)
    return max(1, min(wanted, affordable, MAX_CALLS))


@contextlib.contextmanager
def on_device(device: torch.device) -> Iterator[None]:
    """Make ``device`` current, so streams, events and graphs belong to it (``cuda:1`` included)."""
    with torch.cuda.device(device):
        yield


def make_flush(device: torch.device, enabled: bool) -> tuple[Callable[[], None], int]:
    """``(flush, bytes)``: a function that overwrites a buffer larger than L2, or a no-op."""
    if not enabled:
        return (lambda: None), 0
    nbytes = flush_bytes_for(l2_cache_bytes(device))
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return buffer.zero_, nbytes


def capture_graph(fn: Callable[[], object], device: torch.device) -> Callable[[], None]:
    """Capture ``fn`` into a CUDA graph once; return the replay.

    Warm-up runs on a side stream first, as CUDA graph capture requires (lazy initialisation, cuBLAS
    workspaces and autotuning must not happen during capture). A call that cannot be captured (it
    synchronizes with the host, or allocates outside the graph pool) is unsupported in this mode.
    """
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    try:
        with torch.cuda.stream(stream):
            fn()
            fn()
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
    except RuntimeError as exc:
        raise UnsupportedError(f"cuda_graphs: the call cannot be captured in a CUDA graph ({one_line(exc)})") from None
    return graph.replay


def event_times_ms(
    call: Callable[[], object], flush: Callable[[], None], n_calls: int, device: torch.device
) -> list[float]:
    """Device time of each of ``n_calls`` calls, each after a flush, from start/end CUDA events.

    Every call is queued before the first result is read, so the host never waits between calls.
    """
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    for start, end in zip(starts, ends, strict=True):
        flush()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def host_times_ms(
    call: Callable[[], object], flush: Callable[[], None], n_calls: int, device: torch.device
) -> list[float]:
    """Wall-clock time of ``n_calls`` synchronous calls, each after a flush that is not counted."""
    times = []
    for _ in range(n_calls):
        flush()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        call()
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _timed(
    call: Callable[[], object], device: torch.device, n_calls: int, flush: tuple[Callable[[], None], int],
    flush_l2: bool, cuda_graphs: bool,
) -> CudaTimes:  # fmt: skip
    """Device and host times of ``call`` (run under :func:`on_device` by the caller)."""
    device_ms = event_times_ms(call, flush[0], n_calls, device)
    host_ms = host_times_ms(call, flush[0], min(n_calls, HOST_CALLS), device)
    return CudaTimes(tuple(device_ms), tuple(host_ms), flush_l2, cuda_graphs, flush[1])


def cuda_event_times_ms(
    fn: Callable[[], object], device: torch.device, n_calls: int, flush_l2: bool = True, cuda_graphs: bool = False
) -> CudaTimes:
    """Time ``n_calls`` calls of ``fn`` on ``device``: device time from CUDA events, and host time.

    ``fn`` should already be warm (compiled, autotuned, allocator pools settled); this does not warm
    it up except for the two side-stream calls that graph capture needs.
    """
    with on_device(device):
        call = capture_graph(fn, device) if cuda_graphs else fn
        return _timed(call, device, n_calls, make_flush(device, flush_l2), flush_l2, cuda_graphs)


def cuda_latency(
    fn: Callable[[], object], device: torch.device, *, warmup_runs: int, min_run_time_s: float,
    max_run_time_s: float, min_samples: int, flush_l2: bool = True, cuda_graphs: bool = False,
) -> CudaTimes:  # fmt: skip
    """Warm ``fn`` up, estimate one call, and time as many calls as :func:`calls_for` says.

    One sample is one call (calls_per_sample = 1): CUDA events resolve about half a microsecond, so
    no blocking of calls is needed to beat the timer's resolution.
    """
    with on_device(device):
        for _ in range(warmup_runs):
            fn()
        torch.cuda.synchronize(device)
        call = capture_graph(fn, device) if cuda_graphs else fn
        flush = make_flush(device, flush_l2)
        estimate_ms = statistics.median(event_times_ms(call, flush[0], ESTIMATE_CALLS, device))
        n_calls = calls_for(estimate_ms, min_run_time_s, max_run_time_s, min_samples)
        return _timed(call, device, n_calls, flush, flush_l2, cuda_graphs)
