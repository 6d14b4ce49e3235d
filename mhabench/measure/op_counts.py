"""FLOPs and bytes counted from the ops one call dispatched, and CUDA kernels launched per call.

The cost model (:mod:`mhabench.cost`) prices an implementation by the label it was
registered with; this module counts what actually ran, so a plugin needs no traffic declaration and
a wrong label shows up as a disagreement. docs/cost-model.md ("Counted versus modelled") states the
rules; in short:

- FLOPs: matmul-class work only, like the model's ``flops``: mm, addmm, bmm, baddbmm and every
  SDPA backend from their shapes (FlopCounterMode has no formula for the CPU flash kernel),
  convolutions and the rest of ``torch.utils.flop_counter``'s registry with torch's formulas. Every
  score is counted, masked or not: the convention of the model's ``flops`` and of FlopCounterMode,
  not ``useful_flops``. Softmax and elementwise ops are not FLOPs here, as in the model.
- Bytes: an op that materializes a tensor reads each distinct tensor input once and writes each
  output once; views move nothing. Broadcast (stride-0) dimensions are read once.
- Kernels: the profiler's CUDA kernel events of one call (memcpy and memset are not kernels).

:class:`OpCounter` is fed by the dispatch mode the runner already runs the checked call under
(:class:`mhabench.measure.memory.LiveStorageTracker`), so counting costs no extra call.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.utils.flop_counter import flop_registry

from mhabench.measure.memory import OPAQUE_OPS, tensors_in
from mhabench.results.schema import Counted, ModelledCost

DISAGREEMENT_LIMIT = 0.25
"""Counted and modelled FLOPs or bytes further apart than this (relative to the model) flag the row."""

aten = torch.ops.aten

# Ops that allocate an output without writing it: nothing moves until another op fills it.
ALLOCATION_ONLY = frozenset({aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided})
# In-place ops that overwrite their first argument without reading it (the schema only says "mutated").
OVERWRITES_SELF = frozenset({aten.copy_, aten.fill_, aten.zero_})
# Factories that take a tensor argument for its shape, dtype and device only.
SHAPE_ONLY = frozenset(
    {
        aten.zeros_like,
        aten.ones_like,
        aten.full_like,
        aten.rand_like,
        aten.randn_like,
        aten.new_zeros,
        aten.new_ones,
        aten.new_full,
    }
)
# Ops that compute their intermediates inside one kernel (the memory tracker's list): only their
# inputs and outputs are counted.
OPAQUE = frozenset(getattr(aten, name) for name in OPAQUE_OPS)

NOT_KERNELS = ("Memcpy", "Memset")
"""Name prefixes of CUDA profiler events that are copies or fills done by the driver, not kernels."""


@dataclasses.dataclass(frozen=True)
class OpCounts:
    """What one call's dispatched ops add up to."""

    flops: int
    bytes_moved: int
    opaque_ops: tuple[str, ...] = ()
    """Ops whose internal traffic the counter cannot see: ``bytes_moved`` is a lower bound when set."""

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (NaN when nothing moved)."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.nan


def attention_flops(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> int:
    """QKᵀ plus P·V, every score counted: 2·b·h·n·L·(d_qk + d_v); grouped K/V heads are broadcast."""
    *batch_and_heads, q_len, qk_dim = query.shape
    return 2 * math.prod(batch_and_heads) * q_len * key.shape[-2] * (qk_dim + value.shape[-1])


def _product(a: torch.Tensor, b: torch.Tensor, *_: Any, **__: Any) -> int:
    """mm and bmm: (…, m, k) @ (…, k, n) is 2·(…)·m·k·n, i.e. 2 · numel(a) · n (torch's formula, without
    its pytree walk over the arguments, which would dominate the counter's cost)."""
    return 2 * a.numel() * b.shape[-1]


def _biased_product(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *_: Any, **__: Any) -> int:
    """addmm and baddbmm: the product only; adding the bias is elementwise, as in FlopCounterMode."""
    return _product(a, b)


def _sdpa_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *_: Any, **__: Any) -> int:
    return attention_flops(query, key, value)


def _sdpa_backward(
    grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *_: Any, **__: Any
) -> int:
    """2.5× the forward: the backward recomputes QKᵀ (FlopCounterMode's and the cost model's convention)."""
    return 5 * attention_flops(query, key, value) // 2


def _native_mha(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, embed_dim: int, *_: Any, **__: Any) -> int:
    """nn.MultiheadAttention's fused fast path: Q/K/V projections, attention and W_o in one op."""
    q_tokens, kv_tokens = query.numel() // embed_dim, key.numel() // embed_dim
    projections = 2 * embed_dim * embed_dim * (2 * q_tokens + 2 * kv_tokens)
    attention = 4 * query.shape[0] * query.shape[1] * key.shape[1] * embed_dim
    return projections + attention


def _flop_formulas() -> dict[Any, Callable[..., int]]:
    """torch's formulas (convolutions, scaled and nested kernels), with matmuls and every SDPA entry point
    (forward and backward) counted from their shapes here."""
    sdpa = (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable",
    )
    formulas: dict[Any, Callable[..., int]] = dict(flop_registry)
    formulas |= {aten.mm: _product, aten.bmm: _product, aten.addmm: _biased_product, aten.baddbmm: _biased_product}
    for name in sdpa:
        for suffix, formula in (("", _sdpa_forward), ("_backward", _sdpa_backward)):
            if hasattr(aten, name + suffix):  # torch 2.5 lacks some of them
                formulas[getattr(aten, name + suffix)] = formula
    formulas[aten._native_multi_head_attention] = _native_mha
    return formulas


FLOP_FORMULAS = _flop_formulas()


@dataclasses.dataclass(frozen=True)
class _OpInfo:
    """What the counter needs to know about an op overload, read once from its schema and tags."""

    flops: Callable[..., int] | None
    moves_nothing: bool
    mutates: bool
    out_args: tuple[str, ...]
    overwrites_self: bool
    shape_only: bool
    opaque: bool


@functools.cache
def _op_info(func: Any) -> _OpInfo:
    packet = func._overloadpacket
    return _OpInfo(
        flops=FLOP_FORMULAS.get(packet),
        moves_nothing=packet in ALLOCATION_ONLY or torch.Tag.inplace_view in func.tags,
        mutates=func._schema.is_mutable,
        out_args=tuple(a.name for a in func._schema.arguments if a.is_out),
        overwrites_self=packet in OVERWRITES_SELF,
        shape_only=packet in SHAPE_ONLY,
        # an op outside aten/prims (a torch.library custom op: flash_attn's kernels, say) has no formula
        # here, so its FLOPs and its internal traffic are invisible: the counts are only a lower bound
        opaque=packet in OPAQUE or func.namespace not in ("aten", "prims"),
    )


def op_flops(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Matmul-class FLOPs of one dispatched op (0 for an op with no formula: elementwise, softmax, views)."""
    formula = _op_info(func).flops
    return 0 if formula is None else int(formula(*args, **kwargs, out_val=out))


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor covers: a broadcast (stride-0) dimension is stored once."""
    if tensor.numel() == 0:
        return 0
    distinct = math.prod(size for size, stride in zip(tensor.shape, tensor.stride(), strict=True) if stride != 0)
    return distinct * tensor.element_size()


def op_bytes(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """Bytes one op moves: its distinct tensor inputs read once and its outputs written once.

    An output sharing its storage with an input is a view (nothing moves) unless the op mutates
    (in-place or ``out=``): the schema's mutability decides, so no list of view ops is needed.
    """
    info = _op_info(func)
    if info.moves_nothing:
        return 0
    inputs = _distinct(tensors_in(args) + tensors_in(kwargs))
    input_storages = {key[0] for key in inputs}
    written = [t for key, t in _distinct(tensors_in(out)).items() if info.mutates or key[0] not in input_storages]
    if not written:
        return 0
    for region in _distinct(_unread(info, args, kwargs)):
        inputs.pop(region, None)
    return sum(map(tensor_bytes, inputs.values())) + sum(map(tensor_bytes, written))


def _unread(info: _OpInfo, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """Tensor arguments whose data the op does not read: ``out=`` tensors, the target of copy_/fill_/zero_,
    the template of ``zeros_like`` and its kin."""
    if info.shape_only:
        return tensors_in(args) + tensors_in(kwargs)
    targets = [kwargs[name] for name in info.out_args if name in kwargs]
    if info.overwrites_self and args:
        targets.append(args[0])
    return tensors_in(targets)


def _distinct(tensors: Iterable[torch.Tensor]) -> dict[tuple[Any, ...], torch.Tensor]:
    """One entry per distinct memory region, keyed by (storage, offset, shape, strides, dtype):
    ``x * x`` or ``attention(x, x, x)`` reads x once."""
    return {(_storage_key(t), t.storage_offset(), t.shape, t.stride(), t.dtype): t for t in tensors}


def _storage_key(tensor: torch.Tensor) -> int:
    """The storage a tensor lives in (its own id when it has none, e.g. a tensor subclass)."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(tensor)


class OpCounter:
    """Adds up FLOPs and bytes op by op; a dispatch mode calls :meth:`observe` after each op."""

    def __init__(self) -> None:
        self.flops = 0
        self.bytes_moved = 0
        self._opaque: set[str] = set()

    def observe(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        if any(t.is_nested for t in tensors_in(args) + tensors_in(kwargs) + tensors_in(out)):
            # a nested (jagged) tensor's sizes are symbolic: no formula can count it, so it is opaque work
            self._opaque.add(f"nested {func.__name__.split('.')[0]}")
            return
        self.flops += op_flops(func, args, kwargs, out)
        self.bytes_moved += op_bytes(func, args, kwargs, out)
        if _op_info(func).opaque:
            self._opaque.add(func.__name__.split(".")[0])

    def result(self) -> OpCounts:
        return OpCounts(self.flops, self.bytes_moved, tuple(sorted(self._opaque)))


def counted(counts: OpCounts, model: ModelledCost | None) -> Counted:
    """The ``counted`` group of a row: the counts, and how far the cost model is from them.

    ``model_disagreement`` is the larger relative gap of FLOPs and bytes, relative to the model;
    it stays empty without a model, and when an opaque op hid traffic (``counts.opaque_ops``), since
    a lower bound on the bytes cannot say whether the model is right.
    """
    flops, bytes_moved = counts.flops, counts.bytes_moved
    uncounted = ", ".join(counts.opaque_ops) or None
    if model is None or counts.opaque_ops:
        return Counted(
            measured_flops=flops,
            measured_bytes=bytes_moved,
            measured_intensity=counts.intensity,
            uncounted_ops=uncounted,
        )
    disagreement = max(_relative_gap(flops, model.flops), _relative_gap(bytes_moved, model.bytes_moved))
    return Counted(
        measured_flops=flops,
        measured_bytes=bytes_moved,
        measured_intensity=counts.intensity,
        model_disagreement=disagreement,
        model_disagrees=disagreement > DISAGREEMENT_LIMIT,
        uncounted_ops=uncounted,
    )


def _relative_gap(count: int, model: int) -> float:
    if model == 0:
        return 0.0 if count == 0 else math.inf
    return abs(count - model) / model


def count_cuda_kernels(call: Callable[[], object], device: torch.device) -> int:
    """Device kernels one ``call`` launches on ``device``, from the profiler's CUDA activity.

    Run it after the checked call, so lazy initialisation (cuBLAS handles, autotuning) is not
    counted. Memcpy and memset events are not kernels and are left out; a call that copies between
    host and device shows that in its latency, not here.
    """
    if device.type != "cuda":
        raise ValueError(f"count_cuda_kernels needs a CUDA device, got {device}")
    torch.cuda.synchronize(device)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
        call()
        torch.cuda.synchronize(device)
    return sum(1 for event in profiler.events() if is_kernel(event))


def is_kernel(event: Any) -> bool:
    """A profiler event that is a CUDA kernel: on the device, not a copy, a fill or a user range."""
    return (
        event.device_type == DeviceType.CUDA
        and not event.name.startswith(NOT_KERNELS)
        and not getattr(event, "is_user_annotation", False)
    )
