"""GPU latency as the GPU sees it: CUDA events around each call, a busy GPU ahead of it, optional CUDA graphs.

Host-clock timing of back-to-back calls measures the launch rate when a call is short (an attention
layer at the default sizes is ~15 µs of GPU work on an H100), and repeated calls find their working
set in the 50–60 MB L2, so bandwidth can read above HBM's. Here, as in the best GPU benchmarks:

- each call is bracketed by two CUDA events on the device's current stream; their elapsed time is
  the call's device time;
- before each timed call a *lead* kernel is queued (:func:`make_lead`): with ``flush_l2`` it
  overwrites a buffer of at least twice the L2, so the call starts with a cold cache; without it,
  a spin kernel (``torch.cuda._sleep``) that touches no memory runs for ``SPIN_LEAD_MS``, so the
  warm cache stays warm. Either way the GPU is busy while the host queues the start event and the
  call, so the start event fires when the lead ends, not when the host gets round to launching the
  call. Without a lead, a short call's event time includes the host's launch gap: that is why a
  warm re-read once came out *slower* than a flushed one (docs/measurement.md);
- every call runs under ``torch.cuda.device(device)``, so ``cuda:1`` is timed on its own stream and
  synchronized on its own device;
- with ``cuda_graphs`` the call is captured once into a CUDA graph and the graph is replayed, which
  removes the host's launch overhead from the measurement altogether;
- a host-timed figure per call (launch, run, synchronize) is kept beside it, so launch overhead is
  visible as the difference.

How many calls, in what order and with what warm-up is :mod:`mhabench.measure.rounds`' business.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.torch_errors import is_sticky_cuda_error, one_line

FALLBACK_L2_BYTES = 64 * 2**20  # torch builds that do not report L2_cache_size
FLUSH_MIN_BYTES = 256 * 2**20  # like triton.testing.do_bench: comfortably above any L2 up to B200's 126 MB
FLUSH_L2_MULTIPLE = 2
MAX_CALLS = 10_000  # two events per call: bounded so a sub-microsecond call cannot exhaust memory
HOST_CALLS = 20  # host-timed calls (each synchronized): enough for a stable median
SPIN_LEAD_MS = 0.1  # longer than the host needs to queue an event and a call's first kernels
CALIBRATION_CYCLES = 1_000_000  # ~0.5 ms of spinning at 1.5–2 GHz: long against event resolution


@dataclasses.dataclass(frozen=True)
class CudaTimes:
    """Per-call times of one timed batch of calls."""

    device_ms: tuple[float, ...]
    """CUDA-event time of each call, the lead excluded: the headline latency."""
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


@dataclasses.dataclass(frozen=True)
class Lead:
    """The kernel queued before every timed call, so the GPU is busy while the host queues the call."""

    run: Callable[[], object]
    flush_bytes: int
    """Bytes it overwrites: ≥ 2× L2 for the flush, 0 for the spin (which leaves L2 as it is)."""


def l2_cache_bytes(device: torch.device) -> int:
    """The device's L2 size as torch reports it (``FALLBACK_L2_BYTES`` when it does not)."""
    size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)
    return int(size) if size and size > 0 else FALLBACK_L2_BYTES


def flush_bytes_for(l2_bytes: int) -> int:
    """Size of the buffer overwritten before each call: ≥ 2× L2, and never below ``FLUSH_MIN_BYTES``."""
    return max(FLUSH_L2_MULTIPLE * l2_bytes, FLUSH_MIN_BYTES)


@contextlib.contextmanager
def on_device(device: torch.device) -> Iterator[None]:
    """Make ``device`` current, so streams, events and graphs belong to it (``cuda:1`` included)."""
    with torch.cuda.device(device):
        yield


def spin_cycles_per_ms(device: torch.device) -> float:
    """Clock cycles ``torch.cuda._sleep`` spins per millisecond, measured now with CUDA events.

    A first spin keeps the GPU busy while the timed one is queued, so the host's launch gap is not
    counted (the same reason every timed call gets a lead).
    """
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(CALIBRATION_CYCLES)
    start.record()
    torch.cuda._sleep(CALIBRATION_CYCLES)
    end.record()
    torch.cuda.synchronize(device)
    return CALIBRATION_CYCLES / max(start.elapsed_time(end), 1e-6)


def flush_lead(device: torch.device) -> Lead:
    """Zero a buffer of :func:`flush_bytes_for` bytes: every line of L2 is overwritten, the call starts cold."""
    nbytes = flush_bytes_for(l2_cache_bytes(device))
    return Lead(torch.empty(nbytes, dtype=torch.uint8, device=device).zero_, nbytes)


def spin_lead(device: torch.device) -> Lead:
    """Spin for ``SPIN_LEAD_MS`` without touching memory: the GPU is busy and the warm L2 stays warm."""
    cycles = max(1, round(SPIN_LEAD_MS * spin_cycles_per_ms(device)))
    return Lead(lambda: torch.cuda._sleep(cycles), 0)


def make_lead(device: torch.device, flush_l2: bool) -> Lead:
    """The lead for a timing setting: :func:`flush_lead` with ``flush_l2``, :func:`spin_lead` without."""
    return flush_lead(device) if flush_l2 else spin_lead(device)


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
        if is_sticky_cuda_error(exc) or isinstance(exc, torch.OutOfMemoryError):
            raise  # the context is lost, or memory ran out: not a property of graph capture
        raise UnsupportedError(
            f"cuda_graphs: the call cannot be captured in a CUDA graph ({one_line(exc)})", ReasonCode.NO_CAPTURE
        ) from None
    return graph.replay


def event_times_ms(call: Callable[[], object], lead: Lead, n_calls: int, device: torch.device) -> list[float]:
    """Device time of each of ``n_calls`` calls, each after its lead, from start/end CUDA events.

    Every call is queued before the first result is read, so the host never waits between calls.
    """
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_calls)]
    for start, end in zip(starts, ends, strict=True):
        lead.run()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)]


def host_times_ms(call: Callable[[], object], lead: Lead, n_calls: int, device: torch.device) -> list[float]:
    """Wall-clock time of ``n_calls`` synchronous calls, each after a lead that is not counted."""
    times = []
    for _ in range(n_calls):
        lead.run()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        call()
        torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return times


@dataclasses.dataclass(frozen=True)
class CudaCalls:
    """One callable made ready for timing: the call itself or its graph replay, and its lead."""

    call: Callable[[], object]
    lead: Lead
    device: torch.device

    @classmethod
    def prepare(cls, fn: Callable[[], object], device: torch.device, lead: Lead, cuda_graphs: bool) -> CudaCalls:
        """Capture ``fn`` when ``cuda_graphs`` (two side-stream calls, then the capture); call it as is otherwise."""
        return cls(capture_graph(fn, device) if cuda_graphs else fn, lead, device)

    def device_ms(self, n_calls: int) -> list[float]:
        """Event time of each of ``n_calls`` calls (at most ``MAX_CALLS``), queued back to back behind leads."""
        return event_times_ms(self.call, self.lead, min(n_calls, MAX_CALLS), self.device)

    def host_ms(self, n_calls: int) -> list[float]:
        """Wall time of each of ``n_calls`` synchronous calls."""
        return host_times_ms(self.call, self.lead, n_calls, self.device)


def cuda_event_times_ms(
    fn: Callable[[], object], device: torch.device, n_calls: int, flush_l2: bool = True, cuda_graphs: bool = False
) -> CudaTimes:
    """Time ``n_calls`` calls of ``fn`` on ``device``: device time from CUDA events, then host time.

    ``fn`` should already be warm (compiled, autotuned, allocator pools settled); this does not warm
    it up except for the two side-stream calls that graph capture needs. For comparisons that must
    not depend on when each figure was taken, use :mod:`mhabench.measure.rounds` instead.
    """
    with on_device(device):
        lead = make_lead(device, flush_l2)
        calls = CudaCalls.prepare(fn, device, lead, cuda_graphs)
        device_ms = calls.device_ms(n_calls)
        host_ms = calls.host_ms(min(n_calls, HOST_CALLS))
    return CudaTimes(tuple(device_ms), tuple(host_ms), flush_l2, cuda_graphs, lead.flush_bytes)


def sm_clock_mhz(device: torch.device) -> float:
    """The SM clock now, as NVML reports it; NaN where NVML is unavailable (it is a diagnostic only)."""
    try:
        return float(torch.cuda.clock_rate(device))
    except Exception:  # no pynvml, an NVML error, a torch without clock_rate: the figure is optional
        return math.nan
