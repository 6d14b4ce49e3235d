"""``fused`` with one SDPA backend forced: which kernel behind ``scaled_dot_product_attention`` wins.

``fused`` lets torch pick the backend; these four pin it with ``torch.nn.attention.sdpa_kernel``
so the backends can be compared on the same weights and shapes. A backend torch has no kernel for
on this device/dtype/shape (efficient and cuDNN on the CPU, flash for some head sizes on CUDA)
raises :class:`UnsupportedError`, which the runner records as an ``unsupported`` row. torch words
this differently per device ("No viable backend…" on the CPU, "No available kernel.  Aborting
execution." on CUDA, after warnings that name the reason); :mod:`mhabench.torch_errors` knows both.
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from mhabench import cost
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.fused import SDPA_PATTERNS, FusedAttention
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern
from mhabench.torch_errors import is_no_kernel


class ForcedBackendAttention(FusedAttention):
    """:class:`FusedAttention` whose attention may run only on ``backend`` (no silent fallback)."""

    def __init__(
        self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN, *, backend: SDPBackend
    ) -> None:
        super().__init__(weights, heads, pattern)
        self.backend = backend

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
        try:
            with sdpa_kernel(self.backend):
                return super().attend(q, k, v, causal)
        except RuntimeError as exc:
            if not is_no_kernel(exc):
                raise
            raise UnsupportedError(self._refusal(q, k, v, causal), ReasonCode.SDPA_NO_KERNEL) from None

    def _refusal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
        """What torch refused, in one line: the input it had no kernel for, grouped K/V heads on a backend that
        takes none, and torch's own reasons (its warnings, collected by calling once more: only on this path, so
        the timed calls never pay for catching warnings)."""
        what = f"{q.device.type}/{str(q.dtype).removeprefix('torch.')} with head_dim {q.shape[-1]}"
        line = f"torch {torch.__version__} has no {self.backend.name} SDPA kernel for {what}"
        if k.shape[-3] != q.shape[-3] and self.backend not in GQA_BACKENDS:
            line += (
                f": grouped K/V heads ({k.shape[-3]} K/V heads for {q.shape[-3]} query heads, enable_gqa), which "
                f"torch's {self.backend.name} backend does not take (GQA runs on the flash and math backends)"
            )
        said = _torch_reasons(lambda: super(ForcedBackendAttention, self).attend(q, k, v, causal), self.backend)
        return f"{line}; torch said: {said}" if said else line


GQA_BACKENDS = frozenset({SDPBackend.FLASH_ATTENTION, SDPBackend.MATH})
"""The backends torch documents grouped-query attention (``enable_gqa``) for."""
REASON_LIMIT = 300


def _torch_reasons(call: Callable[[], object], backend: SDPBackend) -> str:
    """torch's warnings while ``call`` fails again under ``backend``, without its "not used because:" headers
    and source locations: the constraint that refused the input, as torch words it ("" when it said nothing)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with contextlib.suppress(RuntimeError), sdpa_kernel(backend):
            call()
    reasons: list[str] = []
    for warning in caught:
        text = re.sub(r"\s*\(Triggered internally at .*\)\s*$", "", str(warning.message), flags=re.DOTALL).strip()
        if text and not text.endswith("because:") and text not in reasons:
            reasons.append(text)
    joined = " ".join(reasons)
    return joined if len(joined) <= REASON_LIMIT else joined[: REASON_LIMIT - 1] + "…"


# (name, backend, what it is, bytes model): the math backend writes and re-reads the n×L scores like naive
_BACKENDS: list[tuple[str, SDPBackend, str, cost.CostModel]] = [
    ("sdpa_math", SDPBackend.MATH, "the math backend (plain aten ops, scores materialized)", cost.MATERIALIZED),
    ("sdpa_flash", SDPBackend.FLASH_ATTENTION, "the flash-attention backend", cost.FUSED_DENSE_MASK),
    ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION, "the memory-efficient backend", cost.FUSED_DENSE_MASK),
    ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION, "the cuDNN backend", cost.FUSED_DENSE_MASK),
]
# Each takes what fused takes; a backend without a kernel for a dense mask says so as an unsupported row.
for _name, _backend, _what, _cost in _BACKENDS:
    register(
        _name,
        description=f"fused with SDPA forced to {_what}",
        cost=_cost,
        capabilities=Capabilities(decode=True, **SDPA_PATTERNS),
    )(functools.partial(ForcedBackendAttention, backend=_backend))

# Kernels that, under a causal mask, skip the key blocks a query block cannot see: their time covers
# about half the n² attention FLOPs, so their throughput is only meaningful on ``useful_flops``.
MASK_SKIPPING_SDPA_BACKENDS = frozenset({"flash", "efficient", "cudnn"})
MASK_SKIPPING_IMPLEMENTATIONS = frozenset(
    {
        "flex",
        "flash_attn",
        "xformers",
        "sdpa_nested",
        "hf_flex_attention",
        "hf_flash_attention_2",
        "hf_flash_attention_3",
    }
)


def kernel_skips_masked_work(sdpa_backend: str, impl_name: str, dense_mask: bool = False) -> bool:
    """True when the attention kernel that ran does not compute fully masked blocks.

    ``sdpa_backend`` is the row's comma-joined backend column ("" when SDPA was not called). The
    math backend and every materialized layout compute the whole n×L score matrix and mask it after;
    so does any SDPA backend given a ``dense_mask`` (it cannot know which blocks are empty), while
    flex, flash_attn and xformers skip the blocks of any mask they were given.
    """
    if impl_name in MASK_SKIPPING_IMPLEMENTATIONS:
        return True
    backends = {name for name in sdpa_backend.split(",") if name}
    return bool(backends) and backends <= MASK_SKIPPING_SDPA_BACKENDS and not dense_mask
