"""Peak memory of one forward call.

CUDA: the caching allocator's peak minus the baseline before the call.
CPU: ``tracemalloc`` does not see torch tensors and RSS is noisy, so a ``TorchDispatchMode``
tracks every tensor storage created during the call, frees it from the count when its last
tensor dies (weakref finalizers), and reports the peak of live bytes. An op output that shares its
storage with one of the op's inputs (a view, a transpose, an in-place write) allocated nothing and
is not counted: weights and caches that existed before the call never enter the figure. Kernel workspaces that never
become tensors (e.g. inside the CPU flash-attention kernel) stay invisible; the method is recorded
in the ``memory_method`` column.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

OpObserver = Callable[[Any, tuple[Any, ...], dict[str, Any], Any], None]
"""Called with ``(func, args, kwargs, out)`` after every op (e.g. :class:`mhabench.measure.op_counts.OpCounter`)."""


class LiveStorageTracker(TorchDispatchMode):
    """Counts bytes of storages created under the mode; remembers the peak, the storages and the ops called.

    ``observers`` see every op too, so other per-op measurements (FLOP and byte counts) ride on
    this one dispatch mode instead of stacking a second one around the call.
    """

    def __init__(self, observers: Sequence[OpObserver] = ()) -> None:
        super().__init__()
        self.live_bytes = 0
        self.peak_bytes = 0
        self.ops: set[str] = set()
        self.op_calls = 0
        self.allocations = 0
        """Storages created under the mode: each one an allocator request and a tensor materialized in memory."""
        self._tracked: set[int] = set()
        self._observers = tuple(observers)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No Dynamo guard around each op: the mode never runs under torch.compile (a compiling implementation's
        first call is timed outside it), and the guard's first use imports ``torch._dynamo``, seconds of a small run."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inputs = tensors_in((args, kwargs))
        nested = any(t.is_nested for t in inputs)
        if not nested and func.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd):
            # A composite op (linear, SDPA) arrives whole under inference_mode; decomposing it here
            # shows the same ops as under no_grad (the backend SDPA picked, the matmuls).
            with self:
                return func.decompose(*args, **kwargs)
        out = func(*args, **kwargs)
        self.ops.add(func.__name__.split(".")[0])
        self.op_calls += 1
        for observe in self._observers:
            observe(func, args, kwargs, out)
        input_storages = {_storage_ptr(t) for t in inputs}
        for leaf in tensors_in(out):
            if _storage_ptr(leaf) not in input_storages:
                self._track(_dense(leaf).untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        key = id(storage)
        if key in self._tracked or storage.device.type == "meta":
            return
        self._tracked.add(key)
        self.allocations += 1
        self.live_bytes += storage.nbytes()
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        weakref.finalize(storage, self._release, key, storage.nbytes())

    def _release(self, key: int, nbytes: int) -> None:
        self._tracked.discard(key)
        self.live_bytes -= nbytes


def tensors_in(tree: Any) -> list[torch.Tensor]:
    """Tensors among an op's arguments or outputs (nested in tuples, lists and dicts).

    A plain walk rather than ``tree_leaves``: it runs for every op of the checked call, and aten
    arguments never hold other containers.
    """
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        tree = tree.values()
    elif not isinstance(tree, (list, tuple)):
        return []
    return [t for item in tree for t in tensors_in(item)]


def _storage_ptr(tensor: torch.Tensor) -> int:
    return _dense(tensor).untyped_storage().data_ptr()


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor whose storage holds the data: a nested (jagged) tensor's packed values, else itself.

    The attribute, not ``values()``: under a dispatch mode that call would dispatch again."""
    values = vars(tensor).get("_values") if tensor.is_nested else None
    return values if isinstance(values, torch.Tensor) else tensor


_SDPA_BACKENDS = {
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_flash_attention_for_cpu": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "_scaled_dot_product_attention_math": "math",
    # nested (jagged) SDPA on CUDA calls the varlen kernels underneath the public ops directly
    "_flash_attention_forward": "flash",
    "_efficient_attention_forward": "efficient",
    "_cudnn_attention_forward": "cudnn",
    # The math backend is a composite op: the dispatch mode sees only its decomposition, whose
    # _safe_softmax (fully masked rows give 0, not NaN) no other attention path emits.
    "_safe_softmax": "math",
    # nn.MultiheadAttention's inference fast path: one fused op (projections + SDPA + W_o).
    "_native_multi_head_attention": "native_mha",
}

# Ops that allocate their intermediates inside one kernel, where the dispatch mode cannot see them.
OPAQUE_OPS = frozenset({"_native_multi_head_attention"})


def tracker_method(ops: set[str]) -> str:
    """``memory_method`` for the storage tracker, saying when an opaque op hid intermediates."""
    opaque = sorted(ops & OPAQUE_OPS)
    if not opaque:
        return "dispatch_storage_tracker"
    return f"dispatch_storage_tracker (outputs only inside {', '.join(opaque)})"


def sdpa_backend(ops: set[str]) -> str:
    """Name of the SDPA backend among ``ops`` ("" when SDPA was not called)."""
    return ",".join(sorted({name for op, name in _SDPA_BACKENDS.items() if op in ops}))
