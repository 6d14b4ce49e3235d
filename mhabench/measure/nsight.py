"""Hardware counters of one call, read by Nsight Compute (``ncu``): the command, its CSV, and what a row gets.

Counting the bytes each dispatched op reads and writes (:mod:`mhabench.measure.op_counts`) cannot see a GEMM
re-reading its tiles, L2 hits between kernels or a fused kernel's spills; DRAM counters can. ``ncu`` replays
every kernel once per metric pass, so it must never run around a timed call: the runner profiles a case's ok
rows in a separate process after their rounds are over (:mod:`mhabench.run.ncu_profile`), and this module holds
the parts that need no GPU: finding ``ncu``, the metrics per dtype, the command line, parsing ``ncu --csv``
and cutting the kernel sequence into one call per implementation at the marker kernels the profiled child
launches between them (:mod:`mhabench.run.ncu_child`).

The metric names are those checked on the H100/H200 test machines (docs/measurement.md): DRAM and L2 bytes,
kernel duration, and the tensor-core op counter of the dtype, which counts 2 per FMA: one replay pass on GH100.
The FP32 instruction counters make it two, so they are asked for only with ``counters_fp32``; a device whose ncu
lacks a metric is profiled again with the checked ones only (the others' columns empty).

Two replay modes (``counters_replay``): ``range`` replays each profiled call as one workload (one result per
call, caches flushed once per call as the timing does, one pass for the default metrics: the fast one), and
``kernel`` replays each kernel on its own (one result per kernel, for kernels.csv; each kernel starts cold).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

from mhabench.results.gpu_groups import HardwareCounters

NCU_FALLBACK = Path("/usr/local/cuda/bin/ncu")
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
DURATION = "gpu__time_duration.sum"
TENSOR_METRICS: dict[str, tuple[str, ...]] = {
    "bfloat16": ("sm__ops_path_tensor_src_bf16_dst_fp32.sum",),
    "float16": ("sm__ops_path_tensor_src_fp16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16_dst_fp16.sum"),
    "float32": ("sm__ops_path_tensor_src_tf32_dst_fp32.sum",),
}
"""Tensor-core op counters (2 per FMA) per dtype: bf16 was checked against 8·b·n·d² + 4·b·n²·d on an H200; the
others are their siblings (fp32 reaches the tensor cores only through TF32)."""
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
FP32_METRICS = (FFMA, FADD, FMUL)
REQUIRED_METRICS = (DRAM_READ, DRAM_WRITE, L2_BYTES, DURATION)
MARKER_KERNEL = re.compile(r"\bspin_kernel\b")
"""``torch.cuda._sleep``'s kernel: the profiled child launches one before each implementation's call."""
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
UNIT_SCALE: dict[str, float] = {
    "": 1.0,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "inst": 1.0,
    "ns": 1e-9,
    "nsecond": 1e-9,
    "us": 1e-6,
    "usecond": 1e-6,
    "ms": 1e-3,
    "msecond": 1e-3,
    "s": 1.0,
    "second": 1.0,
}
"""ncu's units (decimal prefixes) to bytes, counts and seconds."""


class NcuOutputError(ValueError):
    """ncu's output could not be read as the profile of the calls asked for."""


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One profiled kernel: its name and every metric ncu gave for it, in base units (bytes, counts, seconds)."""

    index: int
    name: str
    metrics: dict[str, float]

    @property
    def is_marker(self) -> bool:
        return MARKER_KERNEL.search(self.name) is not None

    def value(self, metric: str) -> float | None:
        return self.metrics.get(metric)


def find_ncu(path_env: str | None = None) -> Path | None:
    """``ncu`` on PATH, else the CUDA toolkit's usual place; None when neither is there."""
    found = shutil.which("ncu", path=path_env if path_env is not None else os.environ.get("PATH"))
    if found:
        return Path(found)
    return NCU_FALLBACK if NCU_FALLBACK.is_file() and os.access(NCU_FALLBACK, os.X_OK) else None


def ncu_version(version_output: str) -> str | None:
    """The version from ``ncu --version`` ("Version 2025.3.1.0 (build ...)"), or None."""
    match = re.search(r"Version\s+(\d+(?:\.\d+)+)", version_output)
    return match.group(1) if match else None


def metrics_for(dtype: str, optional: bool = True, fp32: bool = False) -> tuple[str, ...]:
    """What to ask ncu for a row of ``dtype``; without ``optional``, only those checked on the test machines;
    ``fp32`` adds the FP32 instruction counters (a second replay pass on GH100)."""
    tensor = TENSOR_METRICS.get(dtype, ())
    if not optional:
        return REQUIRED_METRICS + tensor[:1] if dtype == "bfloat16" else REQUIRED_METRICS
    return REQUIRED_METRICS + tensor + (FP32_METRICS if fp32 else ())


WARM_L2 = "L2 warm across replay passes (flush_l2: false)"
"""How a row profiled without the flush is flagged in ``counters_source``: see :func:`ncu_command`."""


RANGE = "range"
KERNEL = "kernel"
RANGE_NOTE = "range replay: one workload per call, L2 flushed once per call"
"""How a row profiled by range replay is labelled in ``counters_source``: its DRAM bytes see L2 reuse between the
kernels of one call (as the timed calls do), where kernel replay starts every kernel cold."""


def ncu_command(
    ncu: Path, metrics: Sequence[str], flush_caches: bool, child: Sequence[str], replay: str = KERNEL
) -> list[str]:
    """The command that profiles ``child`` (a Python command line): only between its profiler start and stop,
    by ``replay`` (``range``: each start/stop range replayed as one workload; ``kernel``: kernel by kernel, one
    result per kernel, which kernels.csv keeps), with the clocks left as they run (``--clock-control none``; the
    default locks them to base).

    The cache policy: ncu flushes (``--cache-control all``, with ``flush_caches``) before every replay pass of
    a workload. A range is one call, so range replay flushes once per call, as the timing does; kernel replay
    flushes before each kernel, so L2 reuse between two kernels of one call is not seen. Without the flush
    (``none``) a pass finds L2 as the previous pass and ncu's save and restore left it: warm, but not as the
    timing's back-to-back calls left it; such rows are flagged (:func:`source_label`)."""
    return [
        str(ncu),
        "--csv",
        "--profile-from-start",
        "off",
        "--replay-mode",
        replay,
        "--metrics",
        ",".join(metrics),
        "--cache-control",
        "all" if flush_caches else "none",
        "--clock-control",
        "none",
        *child,
    ]


def source_label(version: str | None, flush_caches: bool, replay: str = KERNEL) -> str:
    """``counters_source`` of a profiled row: ``ncu <version>``, with the range replay noted and flagged where L2
    was not flushed (its counts then depend on what the replay passes left in L2, not on the timing's policy)."""
    name = f"ncu {version}" if version else "ncu"
    notes = ([RANGE_NOTE] if replay == RANGE else []) + ([] if flush_caches else [WARM_L2])
    return ", ".join([name, *notes])


def failure_reason(output: str) -> str:
    """One line saying why ncu gave no profile: no permission, an unknown metric, or its first error line."""
    if PERMISSION_ERROR in output:
        return f"no permission ({PERMISSION_ERROR})"
    errors = [line.strip() for line in output.splitlines() if line.startswith("==ERROR==")]
    return f"ncu failed: {errors[0].removeprefix('==ERROR==').strip()}" if errors else "ncu failed without a profile"


def unknown_metric(output: str) -> bool:
    """ncu refused a metric name (an older ncu or another GPU generation): profile again with the required ones."""
    return re.search(r"Failed to find metric|metric .* not found|invalid metric", output, re.IGNORECASE) is not None


def metric_value(value: str, unit: str) -> float | None:
    """A CSV value in base units: thousands separators dropped, the unit's prefix applied; None for n/a."""
    text = value.strip().replace(",", "")
    if text.lower() in ("", "n/a", "nan"):
        return None
    scale = UNIT_SCALE.get(unit.strip().lower())
    if scale is None:
        raise NcuOutputError(f"unknown ncu unit {unit!r}")
    return float(text) * scale


def parse_csv(output: str) -> list[Kernel]:
    """The kernels of ``ncu --csv`` output, in launch order: one CSV row per (kernel, metric), ``==PROF==`` and
    program lines around it ignored."""
    lines = [line for line in output.splitlines() if line.startswith('"')]
    if not lines:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    kernels: dict[int, Kernel] = {}
    for row in rows:
        if row.get("ID") == "ID":  # a second header: ncu prints one per profiled process
            continue
        try:
            index = int(row["ID"])
            name, metric = row["Kernel Name"], row["Metric Name"]
            value = metric_value(row["Metric Value"], row.get("Metric Unit") or "")
        except (KeyError, TypeError, ValueError) as exc:
            raise NcuOutputError(f"unreadable ncu CSV row: {exc}") from exc
        kernel = kernels.setdefault(index, Kernel(index, name, {}))
        if value is not None:
            kernel.metrics[metric] = value
    return [kernels[index] for index in sorted(kernels)]


def split_at_markers(kernels: Sequence[Kernel], calls: int) -> list[list[Kernel]]:
    """The kernels of each of ``calls`` profiled calls: the profiled child launches a marker kernel before
    each call, so call *i* is what follows the *i*-th marker, up to the next one. A different marker count
    means the profile does not describe the calls asked for, and no row gets a number from it."""
    markers = [position for position, kernel in enumerate(kernels) if kernel.is_marker]
    if len(markers) != calls:
        raise NcuOutputError(f"{len(markers)} marker kernels in the profile for {calls} calls")
    if markers and markers[0] != 0:
        raise NcuOutputError("kernels before the first marker: the profile holds more than the calls asked for")
    ends = [*markers[1:], len(kernels)]
    return [list(kernels[start + 1 : end]) for start, end in zip(markers, ends, strict=True)]


def split_ranges(results: Sequence[Kernel], calls: int) -> list[list[Kernel]]:
    """Range replay's results, one per profiled call in launch order (the child launches no markers there): a
    different count means the profile does not describe the calls asked for."""
    if len(results) != calls:
        raise NcuOutputError(f"{len(results)} ranges in the profile for {calls} calls")
    return [[result] for result in results]


def _total(kernels: Iterable[Kernel], metric: str) -> float | None:
    """The metric summed over the kernels; None when any kernel lacks it (a partial sum is no measurement)."""
    values = [kernel.value(metric) for kernel in kernels]
    if not values or any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def _sum_present(kernels: Sequence[Kernel], metrics: Sequence[str]) -> float | None:
    """Summed over those of ``metrics`` that every kernel reported; None when none was reported."""
    totals = [total for metric in metrics if (total := _total(kernels, metric)) is not None]
    return sum(totals) if totals else None


def fp32_flops(kernels: Sequence[Kernel]) -> float | None:
    """Non-tensor FP32 FLOPs: an FFMA is two, an FADD or FMUL one; None unless all three were counted."""
    ffma, fadd, fmul = (_total(kernels, metric) for metric in FP32_METRICS)
    if ffma is None or fadd is None or fmul is None:
        return None
    return 2 * ffma + fadd + fmul


def _as_int(value: float | None) -> int | None:
    return None if value is None else round(value)


def counters_of(
    kernels: Sequence[Kernel], dtype: str, source: str, counted_bytes: float | None, per_kernel: bool = True
) -> HardwareCounters:
    """The row's hardware columns from the kernels of its one call (``per_kernel``), or from its one range result
    (range replay, which does not say how many kernels ran); ``counted_bytes``: its ``measured_bytes``."""
    read, write = _total(kernels, DRAM_READ), _total(kernels, DRAM_WRITE)
    tensor = _sum_present(kernels, TENSOR_METRICS.get(dtype, ()))
    scalar = fp32_flops(kernels)
    duration_s = _total(kernels, DURATION)
    dram = read + write if read is not None and write is not None else None
    flops = tensor + (scalar or 0.0) if tensor is not None else None  # FP32 not asked for (counters_fp32): 0
    return HardwareCounters(
        dram_read_bytes=_as_int(read),
        dram_write_bytes=_as_int(write),
        l2_bytes=_as_int(_total(kernels, L2_BYTES)),
        tensor_flops=_as_int(tensor),
        fp32_flops=_as_int(scalar),
        kernels_profiled=len(kernels) if per_kernel else None,
        kernel_time_ms=duration_s * 1e3 if duration_s is not None else None,
        hardware_intensity=flops / dram if flops is not None and dram else None,
        hardware_counted_bytes_ratio=dram / counted_bytes if dram is not None and counted_bytes else None,
        counters_source=source,
    )


def kernel_records(kernels: Sequence[Kernel], dtype: str) -> list[dict[str, object]]:
    """Per kernel of one call: name, duration and the same bytes and FLOPs as the row (kernels.csv)."""
    records: list[dict[str, object]] = []
    for position, kernel in enumerate(kernels):
        counters = counters_of([kernel], dtype, "", None)
        records.append(
            {
                "kernel": position,
                "kernel_name": kernel.name,
                "duration_ms": counters.kernel_time_ms,
                "dram_read_bytes": counters.dram_read_bytes,
                "dram_write_bytes": counters.dram_write_bytes,
                "l2_bytes": counters.l2_bytes,
                "tensor_flops": counters.tensor_flops,
                "fp32_flops": counters.fp32_flops,
            }
        )
    return records
