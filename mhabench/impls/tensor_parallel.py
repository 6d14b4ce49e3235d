"""Megatron-style tensor-parallel attention: whole heads per rank, one all-reduce per layer.

With T ranks, rank r holds query heads ``[r·h/T, (r+1)·h/T)``: its columns of ``W_q`` (column
parallel, so no communication is needed to project) and the matching rows of ``W_o`` (row
parallel: each rank's ``heads_out @ W_o[rows]`` is a partial sum of the full output). One
all-reduce adds the partial sums; ``W_o``'s bias is added after it, so exactly once.

Key/value heads follow their query heads. When ``kv_heads >= T`` each rank holds
``kv_heads / T`` of them. When ``kv_heads < T`` (grouped-query or multi-query attention on many
ranks) a K/V head cannot be split without splitting a head, so it is **replicated**: the
``T / kv_heads`` ranks that serve its query group each hold a full copy of it and compute it
again. That replication is real work and real memory on every rank, and it is what the results show.

The layers are built from the same :class:`~mhabench.impls.weights.AttentionWeights` as every other
implementation and checked against the float64 reference of the whole layer. Their registered cost
is the whole layer's (``fused`` and ``materialized``), which is the sum over ranks; the K/V heads
recomputed on replicating ranks are not in it.

The process groups are made in :mod:`mhabench.distributed.groups`; what the all-reduce costs is
measured in :mod:`mhabench.measure.comm`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Iterator
from typing import Protocol

import torch
import torch.distributed as dist
import torch.nn.functional as F

from mhabench import cost
from mhabench.errors import ConfigError
from mhabench.impls.base import AttentionModule, frozen, linear, materialized_attention, repeat_kv
from mhabench.impls.fused import pack_qkv
from mhabench.impls.registry import Capabilities, ImplSpec, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern

# The all-reduce is not differentiable here and there is no sharded KV cache: forward prefill only.
TP_CAPABILITIES = Capabilities(decode=False, train=False)

# --- which ranks split a layer -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TPGroup:
    """The ranks one tensor-parallel layer is split over, seen from one of them.

    ``group`` is None when ``size`` is 1: a layer on one rank needs no communication.
    """

    size: int
    rank: int
    group: dist.ProcessGroup | None = None


SINGLE_RANK = TPGroup(size=1, rank=0)


_ACTIVE_GROUP: contextvars.ContextVar[TPGroup] = contextvars.ContextVar("tensor_parallel_group", default=SINGLE_RANK)


@contextlib.contextmanager
def using_group(tp: TPGroup) -> Iterator[None]:
    """Layers built inside split over ``tp``: how the registry's ``(weights, heads, pattern)`` factory learns it."""
    token = _ACTIVE_GROUP.set(tp)
    try:
        yield
    finally:
        _ACTIVE_GROUP.reset(token)


def divisibility_problem(heads: int, kv_heads: int, tensor_parallel: int) -> str | None:
    """Why ``heads``/``kv_heads`` cannot be split over ``tensor_parallel`` ranks, or None.

    Query heads must split evenly. Key/value heads either split evenly too, or — when there are
    fewer of them than ranks — each is replicated on ``tensor_parallel / kv_heads`` ranks, which
    needs ``kv_heads`` to divide ``tensor_parallel``. Returned as text so a pydantic validator can
    raise it with the field's path.
    """
    if heads % tensor_parallel:
        return f"heads {heads} is not divisible by tensor_parallel {tensor_parallel}"
    if kv_heads >= tensor_parallel and kv_heads % tensor_parallel:
        return f"kv_heads {kv_heads} is not divisible by tensor_parallel {tensor_parallel}"
    if kv_heads < tensor_parallel and tensor_parallel % kv_heads:
        return (
            f"kv_heads {kv_heads} does not divide tensor_parallel {tensor_parallel} "
            "(fewer K/V heads than ranks are replicated, so each must cover a whole number of ranks)"
        )
    return None


def check_divisible(heads: int, kv_heads: int, tensor_parallel: int) -> None:
    """:func:`divisibility_problem` as a :class:`ConfigError`."""
    problem = divisibility_problem(heads, kv_heads, tensor_parallel)
    if problem:
        raise ConfigError(f"tensor_parallel: {problem}")


# --- this rank's slice of the weights ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class HeadSlice:
    """Column ranges of this rank's heads: ``q`` in ``W_q`` (and rows of ``W_o``), ``kv`` in ``W_k``/``W_v``."""

    q: slice
    kv: slice


def head_slice(heads: int, kv_heads: int, head_dim: int, rank: int, size: int) -> HeadSlice:
    """Rank ``rank`` of ``size`` gets ``heads/size`` whole query heads and the K/V heads they read."""
    q_heads = heads // size
    q_start = rank * q_heads * head_dim
    if kv_heads >= size:
        kv_local = kv_heads // size
        kv_start = rank * kv_local * head_dim
    else:  # replicated: ranks [j·size/kv_heads, (j+1)·size/kv_heads) all hold K/V head j
        kv_local = 1
        kv_start = (rank // (size // kv_heads)) * head_dim
    return HeadSlice(slice(q_start, q_start + q_heads * head_dim), slice(kv_start, kv_start + kv_local * head_dim))


def _part(tensor: torch.Tensor | None, index: tuple[slice, ...]) -> torch.Tensor | None:
    """A copy of the slice, so a rank keeps only its own part of the weights in memory."""
    return None if tensor is None else tensor[index].clone()


def shard_weights(weights: AttentionWeights, heads: int, kv_heads: int, rank: int, size: int) -> AttentionWeights:
    """Rank ``rank``'s weights: ``W_q``/``W_k``/``W_v`` columns and ``W_o`` rows of its heads.

    ``b_o`` is left out: it belongs after the all-reduce, which the layer adds once.
    """
    cols = head_slice(heads, kv_heads, weights.q_dim // heads, rank, size)
    every = slice(None)
    return AttentionWeights(
        w_q=_part(weights.w_q, (every, cols.q)),
        w_k=_part(weights.w_k, (every, cols.kv)),
        w_v=_part(weights.w_v, (every, cols.kv)),
        w_o=_part(weights.w_o, (cols.q, every)),
        b_q=_part(weights.b_q, (cols.q,)),
        b_k=_part(weights.b_k, (cols.kv,)),
        b_v=_part(weights.b_v, (cols.kv,)),
    )


# --- the layers --------------------------------------------------------------------------------


class TensorParallelAttention(AttentionModule):
    """What both variants share: the group, the local head counts, and the output all-reduce.

    ``tp`` defaults to the group set by :func:`using_group` (one rank when none is set).
    """

    def __init__(
        self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN, tp: TPGroup | None = None
    ) -> None:
        super().__init__(weights, heads, pattern)
        self.tp = tp or _ACTIVE_GROUP.get()
        check_divisible(heads, self.kv_heads, self.tp.size)
        self.local_heads = heads // self.tp.size
        self.local_kv_heads = max(1, self.kv_heads // self.tp.size)
        self.b_out = frozen(weights.b_o)

    def shard(self, weights: AttentionWeights) -> AttentionWeights:
        """This rank's slice of ``weights`` (see :func:`shard_weights`)."""
        return shard_weights(weights, self.heads, self.kv_heads, self.tp.rank, self.tp.size)

    def reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """Sum the ranks' partial outputs (one all-reduce), then add ``W_o``'s bias once."""
        out = all_reduce_sum(partial, self.tp)
        return out if self.b_out is None else out + self.b_out


def is_tensor_parallel(spec: ImplSpec) -> bool:
    """Whether ``spec`` splits its heads over a group: only such layers can run a ``tensor_parallel`` > 1 case."""
    return isinstance(spec.factory, type) and issubclass(spec.factory, TensorParallelAttention)


@register(
    "tp_fused",
    description="tensor-parallel heads (torchrun): per rank a packed QKV GEMM and SDPA on its heads, its W_o rows, "
    "one all-reduce",
    cost=cost.FUSED,
    capabilities=TP_CAPABILITIES,
)
class TensorParallelFused(TensorParallelAttention):
    """``tp_fused``: this rank's heads as one packed QKV GEMM and SDPA, a partial W_o, one all-reduce."""

    def __init__(
        self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN, tp: TPGroup | None = None
    ) -> None:
        super().__init__(weights, heads, pattern, tp)
        local = self.shard(weights)
        w_qkv, b_qkv = pack_qkv(local)
        self.w_qkv, self.b_qkv = frozen(w_qkv), frozen(b_qkv)
        self.w_out = frozen(local.w_o.t().contiguous())
        self.split_sizes = [local.w_q.shape[1], local.kv_dim, local.kv_dim]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = F.linear(x, self.w_qkv, self.b_qkv).split(self.split_sizes, dim=-1)
        q = self.split_heads(q, self.local_heads)
        k, v = self.split_heads(k, self.local_kv_heads), self.split_heads(v, self.local_kv_heads)
        grouped = self.local_kv_heads != self.local_heads
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=grouped)
        return self.reduce(F.linear(self.merge_heads(out), self.w_out))


@register(
    "tp_naive",
    description="tensor-parallel heads (torchrun): per rank Q/K/V GEMMs and materialized softmax on its heads, "
    "its W_o rows, one all-reduce",
    cost=cost.MATERIALIZED,
    capabilities=TP_CAPABILITIES,
)
class TensorParallelNaive(TensorParallelAttention):
    """``tp_naive``: this rank's heads as three GEMMs and a materialized softmax, a partial W_o, one all-reduce."""

    def __init__(
        self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN, tp: TPGroup | None = None
    ) -> None:
        super().__init__(weights, heads, pattern, tp)
        local = self.shard(weights)
        self.w_q, self.w_k, self.w_v, self.w_o = (frozen(t) for t in (local.w_q, local.w_k, local.w_v, local.w_o))
        self.b_q, self.b_k, self.b_v = (frozen(t) for t in (local.b_q, local.b_k, local.b_v))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.split_heads(linear(x, self.w_q, self.b_q), self.local_heads)
        k = self.split_heads(linear(x, self.w_k, self.b_k), self.local_kv_heads)
        v = self.split_heads(linear(x, self.w_v, self.b_v), self.local_kv_heads)
        groups = self.local_heads // self.local_kv_heads
        out = materialized_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), self.causal)
        return self.reduce(self.merge_heads(out) @ self.w_o)


# --- the all-reduce ----------------------------------------------------------------------------------


class AllReduceRecorder(Protocol):
    """What :func:`recording_all_reduces` hands each all-reduce to (``mhabench.measure.comm.CommTracker``)."""

    def record(self, elapsed_ms: float, nbytes: int) -> None: ...


_ACTIVE_RECORDER: contextvars.ContextVar[AllReduceRecorder | None] = contextvars.ContextVar(
    "all_reduce_recorder", default=None
)


@contextlib.contextmanager
def recording_all_reduces(recorder: AllReduceRecorder) -> Iterator[None]:
    """Every all-reduce the layers issue inside is timed on the host and reported to ``recorder``."""
    token = _ACTIVE_RECORDER.set(recorder)
    try:
        yield
    finally:
        _ACTIVE_RECORDER.reset(token)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def all_reduce_sum(tensor: torch.Tensor, tp: TPGroup) -> torch.Tensor:
    """Sum ``tensor`` over ``tp`` in place (nothing to do on one rank), reporting to an active recorder.

    With a recorder, the stream is synchronized before (so queued compute is not billed to
    communication) and after (so the transfer has finished) a synchronous collective.
    """
    if tp.group is None:
        return tensor
    recorder = _ACTIVE_RECORDER.get()
    if recorder is None:
        dist.all_reduce(tensor, group=tp.group)
        return tensor
    _synchronize(tensor.device)
    start_s = time.perf_counter()
    dist.all_reduce(tensor, group=tp.group)
    _synchronize(tensor.device)
    recorder.record((time.perf_counter() - start_s) * 1e3, tensor.numel() * tensor.element_size())
    return tensor
