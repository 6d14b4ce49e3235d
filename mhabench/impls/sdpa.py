"""``fused`` with one SDPA backend forced: which kernel behind ``scaled_dot_product_attention`` wins.

``fused`` lets torch pick the backend; these four pin it with ``torch.nn.attention.sdpa_kernel``
so the backends can be compared on the same weights and shapes. A backend torch has no kernel for
on this device/dtype/shape (efficient and cuDNN on the CPU, flash for some head sizes on CUDA)
raises :class:`UnsupportedError`, which the runner records as an ``unsupported`` row.
"""

from __future__ import annotations

import functools

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from mhabench.errors import UnsupportedError
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Traffic, register
from mhabench.weights import AttentionWeights

# torch's message when the forced backend rejects the inputs (no kernel for this device/dtype/shape)
_NO_KERNEL = "No viable backend for scaled_dot_product_attention"


class ForcedBackendAttention(FusedAttention):
    """:class:`FusedAttention` whose attention may run only on ``backend`` (no silent fallback)."""

    def __init__(self, weights: AttentionWeights, heads: int, causal: bool = False, *, backend: SDPBackend) -> None:
        super().__init__(weights, heads, causal)
        self.backend = backend

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        try:
            with sdpa_kernel(self.backend):
                return super().attend(q, k, v, causal)
        except RuntimeError as exc:
            if _NO_KERNEL not in str(exc):
                raise
            raise UnsupportedError(
                f"torch {torch.__version__} has no {self.backend.name} SDPA kernel for "
                f"{q.device.type}/{str(q.dtype).removeprefix('torch.')} with head_dim {q.shape[-1]}"
            ) from None


# (name, backend, what it is, bytes model): the math backend writes and re-reads the n×L scores like naive
_BACKENDS: list[tuple[str, SDPBackend, str, Traffic]] = [
    ("sdpa_math", SDPBackend.MATH, "the math backend (plain aten ops, scores materialized)", "materialized"),
    ("sdpa_flash", SDPBackend.FLASH_ATTENTION, "the flash-attention backend", "fused"),
    ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION, "the memory-efficient backend", "fused"),
    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION, "the cuDNN backend", "fused"),
]
for _name, _backend, _what, _traffic in _BACKENDS:
    register(_name, description=f"fused with SDPA forced to {_what}", traffic=_traffic)(
        functools.partial(ForcedBackendAttention, backend=_backend)
    )
