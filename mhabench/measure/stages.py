"""Where one call's time, FLOPs and bytes go, stage by stage of the layer (docs/stages.md).

A call is cut into *units* — on the CPU the aten ops torch's profiler records (with their shapes), on CUDA the
kernels (from kernels.csv with Nsight Compute's counters, or the profiler's kernel events with durations only) —
and each unit is given a stage of :data:`mhabench.stage_cost.STAGES` by two rules, both on what ran, never on
which implementation ran it (so a plugin or a peer we did not write gets the same treatment):

1. **kind, by name**: a GEMM (mm, bmm, addmm; cuBLAS/nvjet/CUTLASS kernels), a fused attention kernel (SDPA's
   flash/efficient/cuDNN, flash_attn), a softmax, a mask op, a copy, another elementwise op;
2. **stage, by order**: a GEMM followed by a softmax (before another GEMM) computes the scores, a GEMM right
   after a softmax is P·V; GEMMs after the last attention kernel or P·V are the output projection, the other
   GEMMs the QKV projection; elementwise ops between a scores GEMM and its P·V belong to mask/softmax.

The breakdown is measured in a call of its own after the timing (never in a timed call): the profiler's
overhead inflates each op a little, so time shares, not milliseconds, are what it reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.autograd import DeviceType

from mhabench.measure.op_counts import is_kernel
from mhabench.results.cells import number
from mhabench.results.stages import StageFigures
from mhabench.stage_cost import STAGES, StageCost

GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation"})
MASK_OPS = frozenset({"aten::masked_fill", "aten::masked_fill_", "aten::triu", "aten::tril", "aten::where"})
COPY_OPS = frozenset(
    {"aten::copy_", "aten::clone", "aten::contiguous", "aten::cat", "aten::stack", "aten::to", "aten::_to_copy"}
)
ELEMENTWISE_OPS = frozenset({"aten::div", "aten::mul", "aten::add", "aten::sub", "aten::tanh", "aten::div_"})
MASK_KERNEL_WORDS = ("masked_fill", "triu_tril", "fillfunctor")
COPY_KERNEL_WORDS = ("copy", "catarraybatched")
GEMM_KERNEL_WORDS = ("gemm", "nvjet", "cutlass", "xmma", "cublas", "sm90_", "sm80_", "ampere_")
ATTENTION_KERNEL_WORDS = ("flash", "fmha", "sdpa", "attention", "attn")
NAME_WIDTH = 80
"""Longest kernel name kept: template signatures run to hundreds of characters."""
EXPAND_THROUGH = ("_scaled_dot_product_attention_math",)
"""Composite SDPA that runs as plain bmm/softmax ops: its children are the units."""


@dataclasses.dataclass(frozen=True)
class Unit:
    """One op or kernel of the profiled call, as the breakdown attributes it."""

    name: str
    kind: str
    """gemm, attention, softmax, mask, copy, elementwise or other (:func:`kind_of`)."""
    time_ms: float
    flops: float | None = None
    """Matmul-class FLOPs (None where nothing counted them: a kernel profiled without counters)."""
    bytes_moved: float | None = None
    shapes: str = ""
    """The op's input shapes as the profiler recorded them (CPU), "" for a kernel."""

    @property
    def label(self) -> str:
        """The name with its shapes, as a user would search for it (`aten::bmm [[8,1,64],[8,64,192]]`); a kernel's
        template signature is cut at its first ``(``."""
        return f"{self.name} {self.shapes}" if self.shapes else self.name.split("(")[0][:NAME_WIDTH]


def kind_of(name: str) -> str:
    """The kind of an op (``aten::…``, by its exact name) or a CUDA kernel (by words in its name)."""
    lowered = name.lower()
    if "softmax" in lowered:
        return "softmax"
    if name.startswith("aten::"):
        return _op_kind(name)
    if any(word in lowered for word in ATTENTION_KERNEL_WORDS):
        return "attention"
    if any(word in lowered for word in GEMM_KERNEL_WORDS):
        return "gemm"
    if any(word in lowered for word in MASK_KERNEL_WORDS):
        return "mask"
    if any(word in lowered for word in COPY_KERNEL_WORDS):
        return "copy"
    return "elementwise" if "elementwise" in lowered else "other"


def _op_kind(name: str) -> str:
    if name in GEMM_OPS:
        return "gemm"
    if name.startswith(("aten::_scaled_dot_product_", "aten::_flash", "aten::_efficient")):
        return "attention"
    if name in MASK_OPS:
        return "mask"
    if name in COPY_OPS:
        return "copy"
    return "elementwise" if name in ELEMENTWISE_OPS else "other"


def assign_stages(kinds: Sequence[str]) -> list[str]:
    """The stage of each unit of one call, from the kinds in launch order (module doc, rule 2)."""
    anchors = [i for i, kind in enumerate(kinds) if kind in ("gemm", "softmax", "attention")]
    stages = ["other"] * len(kinds)
    for position, i in enumerate(anchors):
        if kinds[i] != "gemm":
            continue
        after = kinds[anchors[position + 1]] if position + 1 < len(anchors) else ""
        before = kinds[anchors[position - 1]] if position > 0 else ""
        stages[i] = "scores" if after == "softmax" else "pv" if before == "softmax" else ""
    cores = [i for i, kind in enumerate(kinds) if kind == "attention" or stages[i] == "pv"]
    last_core = max(cores, default=None)
    gemms = [i for i, kind in enumerate(kinds) if kind == "gemm" and not stages[i]]
    for i in gemms:
        after_core = last_core is not None and i > last_core
        no_core_last = last_core is None and len(gemms) > 1 and i == gemms[-1]
        stages[i] = "out_projection" if after_core or no_core_last else "qkv_projection"
    inside = _inside_attention(stages)
    for i, kind in enumerate(kinds):
        if kind == "attention":
            stages[i] = "attention"
        elif kind in ("softmax", "mask") or (kind == "elementwise" and inside[i]):
            stages[i] = "mask_softmax"
        elif kind == "copy":
            stages[i] = "layout"
    return stages


def _inside_attention(stages: Sequence[str]) -> list[bool]:
    """Whether each unit lies between a scores GEMM and the P·V that follows it."""
    inside, flags = False, []
    for stage in stages:
        inside = (inside or stage == "scores") and stage != "pv"
        flags.append(inside and stage != "scores")
    return flags


def breakdown(
    units: Sequence[Unit], model: dict[str, StageCost] | None, total_ms: float | None = None
) -> list[StageFigures]:
    """Per stage (every stage with a unit or a model figure): time and share, FLOPs, bytes, the model's figures.

    ``total_ms`` is the call's own time; what the units do not cover (Python, dispatch) is added to ``other``.
    """
    stages = assign_stages([unit.kind for unit in units])
    covered = sum(unit.time_ms for unit in units)
    total = max(total_ms or 0.0, covered)
    figures = []
    for stage in STAGES:
        mine = [unit for unit, assigned in zip(units, stages, strict=True) if assigned == stage]
        modelled = (model or {}).get(stage)
        gap = total - covered if stage == "other" else 0.0
        if not mine and modelled is None and gap <= 0:
            continue
        time_ms = sum(unit.time_ms for unit in mine) + gap
        top = max(mine, key=lambda unit: unit.time_ms, default=None)
        figures.append(
            StageFigures(
                stage=stage,
                time_ms=time_ms,
                time_share=time_ms / total if total > 0 else math.nan,
                flops=_total(unit.flops for unit in mine),
                bytes_moved=_total(unit.bytes_moved for unit in mine),
                model_flops=None if modelled is None else modelled.flops,
                model_bytes=None if modelled is None else modelled.bytes_moved,
                ops=len(mine),
                top_op="" if top is None else top.label,
                top_op_count=0 if top is None else sum(unit.label == top.label for unit in mine),
            )
        )
    return figures


def _total(values: Iterable[float | None]) -> float | None:
    """The sum, or None when any unit lacks the figure (a partial sum would understate the stage)."""
    given = list(values)
    known = [value for value in given if value is not None and not math.isnan(value)]
    return float(sum(known)) if len(known) == len(given) else None


# --- CPU: torch's profiler, ops with shapes ---------------------------------------------------------------


@contextlib.contextmanager
def quiet_profiler() -> Iterator[None]:
    """Silence what the profiler's C++ side writes to the process's stderr (``USDT: … profiler_start`` lines from
    Kineto, which no logging setting turns off), so a run's output stays its own. Python exceptions still rise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w", encoding="utf-8") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


PROFILED_CPU_CALLS = 3
"""The most CPU calls profiled per row. On a shared machine one call can be preempted mid-way, and the time the
process sat idle lands in no op, so a single call could put most of the row in "other" (seen on the shared 2-core
VM, torch 2.13.0+cpu: 92 % "other" for `naive` at n=128 in run 20261127T093556Z-rb-tiny, 3-28 % in four calls
profiled right after)."""
RUNNING_SHARE = 0.9
"""A profiled call whose thread ran on a CPU for at least 90 % of its wall time was not preempted (a time slice
given away is milliseconds, most of a small call): it is kept alone, and the second call's profiler and event
processing (most of a small row's own cost) is saved. A call that waited on intra-op threads falls under it too
and goes to the two-call rule."""
AGREEING_WALL = 0.25
"""Two profiled calls whose wall times are within 25 % of each other were not preempted (preemption adds tens of
milliseconds, or doubles a short call): the faster is kept and the third call is saved."""


@dataclasses.dataclass
class ProfiledCall:
    """One profiled call: its ops as a tree, its wall time and the CPU time of the thread that made it."""

    ops: list[ProfiledOp]
    wall_ms: float
    thread_ms: float

    @property
    def preempted(self) -> bool:
        """The thread was off a CPU for more than a tenth of the call (:data:`RUNNING_SHARE`)."""
        return self.thread_ms < RUNNING_SHARE * self.wall_ms


def profile_cpu(
    call: Callable[[], object], element_bytes: int, calls: int = PROFILED_CPU_CALLS
) -> tuple[list[Unit], float]:
    """The units of one typical profiled call of ``call`` and its wall time: the first call when nothing preempted
    it (:data:`RUNNING_SHARE`); else the faster of the first two when their wall times agree within
    :data:`AGREEING_WALL`; else the median-wall-time call of ``calls``."""
    return _typical(call, _profile_cpu_once(call), element_bytes, calls)


def profile_cpu_each(
    calls: Sequence[Callable[[], object]], element_bytes: int, most: int = PROFILED_CPU_CALLS
) -> list[tuple[list[Unit], float]]:
    """:func:`profile_cpu` of each of ``calls``, their first profiled calls made in one session of the profiler,
    one after the other: a session's start and stop cost more than a small call's own profile, so a case's
    implementations share one. Each call's ops are those inside its own range (:data:`CALL_RANGE`); a preempted one
    is profiled again alone, as :func:`profile_cpu` would."""
    firsts = _profile_cpu_session(calls)
    return [_typical(call, first, element_bytes, most) for call, first in zip(calls, firsts, strict=True)]


def _typical(
    call: Callable[[], object], first: ProfiledCall, element_bytes: int, calls: int
) -> tuple[list[Unit], float]:
    """The units and wall time of the typical profiled call, ``first`` being the first one (:func:`profile_cpu`)."""
    profiled = [first]
    if not first.preempted or calls == 1:
        return _units(first, element_bytes)
    profiled.append(_profile_cpu_once(call))
    if math.isclose(profiled[0].wall_ms, profiled[1].wall_ms, rel_tol=AGREEING_WALL):
        return _units(min(profiled, key=lambda found: found.wall_ms), element_bytes)
    profiled += [_profile_cpu_once(call) for _ in range(calls - len(profiled))]
    profiled.sort(key=lambda found: found.wall_ms)
    return _units(profiled[len(profiled) // 2], element_bytes)


def _units(profiled: ProfiledCall, element_bytes: int) -> tuple[list[Unit], float]:
    """The units of a profiled call, in the order its outermost ops started, and its wall time."""
    return [unit for op in profiled.ops for unit in _units_of(op, element_bytes)], profiled.wall_ms


def _cpu_profiler() -> torch.autograd.profiler.profile:
    """torch's autograd profiler with the ops' shapes: the one ``torch.profiler.profile`` wraps, with the same Kineto
    CPU events; the wrapper's first start looks up ``torch._inductor`` (to read a CUDA-graph setting), which imports
    Dynamo and Inductor, seconds of a process's start on a small CPU for a setting a CPU profile never uses."""
    return torch.autograd.profiler.profile(use_cpu=True, use_device=None, record_shapes=True, use_kineto=True)


def _profile_cpu_once(call: Callable[[], object]) -> ProfiledCall:
    """One warm call of ``call`` under torch's profiler (:func:`_cpu_profiler`, :func:`_profile_cpu_session`): its op
    tree, wall and thread CPU time."""
    return _profile_cpu_session([call])[0]


CALL_RANGE = "mhabench::profiled_call"
"""The range (``record_function``) around each call of a profiling session: its ops are the ops inside it."""


def _profile_cpu_session(calls: Sequence[Callable[[], object]]) -> list[ProfiledCall]:
    """Each of ``calls`` once, in order, in one session of the profiler: their op trees, wall and thread CPU times.

    The session's first call runs cold: right after the profiler starts, each op of a small call takes about twice
    as long as in the next call, and the call itself two to three times as long (fused at n = 16 on the 2-vCPU VM:
    419 µs against 159 µs unprofiled and 160–186 µs for the session's later calls). So the first call is made
    twice and its cold profile dropped: every profiled call of a session is a warm one, whatever its place."""
    profiler, times = _cpu_profiler(), []
    with quiet_profiler(), profiler:
        for call in [calls[0], *calls]:
            with torch.autograd.profiler.record_function(CALL_RANGE):
                start, thread_start = time.perf_counter(), time.thread_time()
                call()
                thread_ms = (time.thread_time() - thread_start) * 1e3
                wall_ms = (time.perf_counter() - start) * 1e3
            times.append((wall_ms, thread_ms))
    ranges = [op for op in op_tree(profiler.kineto_results.events()) if op.name == CALL_RANGE]
    warm = zip(ranges[1:], times[1:], strict=True)
    return [ProfiledCall(found.children, wall_ms, thread_ms) for found, (wall_ms, thread_ms) in warm]


# --- the profiler's ops as a tree --------------------------------------------------------------------------


HIDDEN_OPS = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
"""Events torch's own event list leaves out (``torch.autograd.profiler_util._filter_name``)."""


@dataclasses.dataclass
class ProfiledOp:
    """One op the profiler recorded, with the ops it called."""

    name: str
    start_ns: int
    end_ns: int
    shapes: list[list[int]]
    children: list[ProfiledOp] = dataclasses.field(default_factory=list)

    @property
    def time_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def op_tree(events: Iterable[Any]) -> list[ProfiledOp]:
    """The outermost ops of the profiler's raw events (``kineto_results.events()``), each with its callees, in
    start order: the tree ``profiler.events()`` builds (an op is a child of the innermost op on its thread whose
    interval holds its own), without building torch's Python event objects, which cost most of a small row's
    profiled call."""
    by_thread: dict[int, list[ProfiledOp]] = {}
    for event in events:
        name = event.name()
        if name in HIDDEN_OPS or _hidden(event):
            continue
        op = ProfiledOp(name, event.start_ns(), event.end_ns(), event.shapes())
        by_thread.setdefault(event.start_thread_id(), []).append(op)
    roots: list[ProfiledOp] = []
    for ops in by_thread.values():
        ops.sort(key=lambda op: (op.start_ns, -op.end_ns))
        open_ops: list[ProfiledOp] = []
        for op in ops:
            while open_ops and (op.start_ns >= open_ops[-1].end_ns or op.end_ns > open_ops[-1].end_ns):
                open_ops.pop()
            (open_ops[-1].children if open_ops else roots).append(op)
            open_ops.append(op)
    roots.sort(key=lambda op: op.start_ns)
    return roots


def _hidden(event: Any) -> bool:
    """Left out of the tree, as torch's event list leaves it, besides the utility ops of :data:`HIDDEN_OPS`: a hidden
    or async event, not the CPU's."""
    return (
        getattr(event, "is_hidden_event", _never)()
        or event.device_type() != DeviceType.CPU
        or event.is_async()
        or event.start_thread_id() != event.end_thread_id()
    )


def _never() -> bool:
    return False


def _units_of(op: ProfiledOp, element_bytes: int) -> list[Unit]:
    """The outermost ops of a known kind under ``op`` (itself included); leaves of no kind are ``other``."""
    kind = kind_of(op.name)
    expands = op.name.endswith(EXPAND_THROUGH)
    if (kind == "other" or expands) and op.children:
        return [unit for child in op.children for unit in _units_of(child, element_bytes)]
    shapes = [list(shape) for shape in (op.shapes or [])]
    flops, moved = op_figures(kind, shapes, element_bytes)
    return [Unit(op.name, kind, op.time_ms, flops, moved, shapes_text(shapes) if shapes else "")]


def shapes_text(shapes: list[list[int]]) -> str:
    """The op's non-empty input shapes as a label writes them: ``[[2,16,32],[96,32]]``."""
    return "[" + ",".join("[" + ",".join(map(str, shape)) + "]" for shape in shapes if shape) + "]"


def op_figures(kind: str, shapes: list[list[int]], element_bytes: int) -> tuple[float, float]:
    """FLOPs and bytes of one op from its input shapes.

    A (batched) GEMM reads both operands and writes its product, each batch entry's operands once: a weight
    broadcast over a batch of tokens is read once per token, which is what such a GEMM streams. Other ops read
    their tensor inputs and write one output the size of the largest.
    """
    tensors = [shape for shape in shapes if shape]
    if kind == "gemm" and len(tensors) >= 2:
        a, b = tensors[-2], tensors[-1]
        batch = math.prod(a[:-2])
        m, k, n = a[-2], a[-1], b[-1]
        weight_copies = math.prod(b[:-2] or [1])
        return 2.0 * batch * m * k * n, float((batch * (m * k + m * n) + weight_copies * k * n) * element_bytes)
    if kind == "attention" and len(tensors) >= 3:
        query, key, value = tensors[:3]
        flops = 2.0 * math.prod(query[:-2]) * query[-2] * key[-2] * (query[-1] + value[-1])
        return flops, float((sum(math.prod(shape) for shape in tensors[:3]) + math.prod(query)) * element_bytes)
    sizes = [math.prod(shape) for shape in tensors]
    return 0.0, float((sum(sizes) + max(sizes, default=0)) * element_bytes)


# --- CUDA: kernels ----------------------------------------------------------------------------------------


def kernel_units(kernels: Iterable[dict[str, Any]]) -> list[Unit]:
    """Units from kernel records in launch order (kernels.csv's columns; counters empty when none ran)."""
    units = []
    for kernel in kernels:
        tensor, fp32 = number(kernel, "tensor_flops"), number(kernel, "fp32_flops")
        read, write = number(kernel, "dram_read_bytes"), number(kernel, "dram_write_bytes")
        flops = None if tensor is None else tensor + (fp32 or 0.0)
        moved = None if read is None else read + (write or 0.0)
        name = str(kernel["kernel_name"])
        units.append(Unit(name, kind_of(name), float(kernel["duration_ms"]), flops, moved))
    return units


def profile_cuda(call: Callable[[], object], device: torch.device) -> list[Unit]:
    """The kernels of one call under the profiler: names and durations (no counters), in launch order."""
    torch.cuda.synchronize(device)
    with quiet_profiler(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        call()
        torch.cuda.synchronize(device)
    events = sorted((event for event in profiler.events() if is_kernel(event)), key=lambda e: e.time_range.start)
    return [Unit(event.name, kind_of(event.name), event.device_time / 1e3) for event in events]
