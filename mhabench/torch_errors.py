"""What a failed (case, implementation) was: out of memory, no kernel for it, or a real error.

The runner turns every exception into a row. The status must say why: an ``oom`` row is a fact about
the case's size on this device, an ``unsupported`` row a fact about the implementation, an ``error``
row a bug. CUDA libraries report running out of memory in their own words (cuBLAS, cuDNN, the CUDA
runtime), so the exception type alone is not enough; the texts below are the ones torch 2.5–2.14
and its libraries raise.

Some CUDA errors are *sticky*: after an illegal memory access or a device-side assert the CUDA
context is corrupted and every later call in the process fails with the same error. The runner
must not blame the following rows on their implementations, so :func:`is_sticky_cuda_error` lets
it stop measuring and mark the rest instead.
"""

from __future__ import annotations

from typing import Literal

import torch

from mhabench.errors import ReasonCode, UnsupportedError

FailureStatus = Literal["oom", "unsupported", "error"]

# Lower-case fragments of messages that mean "not enough memory", whatever raised them.
OOM_TEXTS = (
    "cuda out of memory",  # the caching allocator (torch.OutOfMemoryError)
    "cuda error: out of memory",  # the CUDA runtime (cudaErrorMemoryAllocation)
    "cublas_status_alloc_failed",  # cuBLAS could not allocate its workspace
    "cudnn_status_alloc_failed",  # cuDNN (legacy API)
    "cudnn_status_not_enough_workspace",
    "cudnn_status_bad_param_out_of_memory",
    "cusolver_status_alloc_failed",
    "cufft_alloc_failed",
    "can't allocate memory",  # the CPU allocator: "DefaultCPUAllocator: can't allocate memory"
    "out of memory",  # anything else that says so (xformers, flash_attn, triton)
)

# Fragments meaning the library has no kernel for this device/dtype/shape: the implementation cannot
# run the case, which is a fact to report, not a failure.
NO_KERNEL_TEXTS = (
    "no viable backend for scaled_dot_product_attention",  # SDPA on the CPU
    "no available kernel",  # SDPA on CUDA: "No available kernel.  Aborting execution."
    "no execution plans support the graph",  # cuDNN frontend: no engine for this shape
    "no kernel image is available for execution on the device",  # wheel built without this GPU's arch
)

# Errors after which the CUDA context is unusable for the rest of the process.
STICKY_CUDA_TEXTS = (
    "an illegal memory access was encountered",
    "device-side assert triggered",
    "unspecified launch failure",
    "misaligned address",
    "an illegal instruction was encountered",
    "illegal address",
    "the launch timed out and was terminated",
    "uncorrectable ecc error",
    "hardware stack error",
    "cuda error: unknown error",
    "an unspecified cuda error",
)

MAX_MESSAGE_CHARS = 300


def _text(exc: BaseException) -> str:
    return str(exc).lower()


def is_out_of_memory(exc: BaseException) -> bool:
    """True when ``exc`` says memory ran out (torch's, the CPU allocator's or a CUDA library's words)."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(text in _text(exc) for text in OOM_TEXTS)


def is_no_kernel(exc: BaseException) -> bool:
    """True when ``exc`` says there is no kernel for this device/dtype/shape."""
    return isinstance(exc, RuntimeError) and any(text in _text(exc) for text in NO_KERNEL_TEXTS)


def is_sticky_cuda_error(exc: BaseException) -> bool:
    """True when ``exc`` leaves the CUDA context corrupted, so every later CUDA call would fail too."""
    if isinstance(exc, torch.OutOfMemoryError):
        return False  # recoverable: free memory and carry on
    # torch ≥ 2.8 raises torch.AcceleratorError for CUDA errors: a RuntimeError subclass
    return isinstance(exc, RuntimeError) and any(text in _text(exc) for text in STICKY_CUDA_TEXTS)


def one_line(exc: BaseException) -> str:
    """``Type: first line of the message``, cut to a readable length (CUDA errors span many lines)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def classify_failure(exc: BaseException) -> tuple[FailureStatus, str]:
    """``(status, one_line_message)`` for the row of a (case, implementation) that raised ``exc``."""
    if isinstance(exc, UnsupportedError):  # the implementation's own reason, without the type name
        lines = str(exc).strip().splitlines()
        return "unsupported", (lines[0] if lines else "unsupported")[:MAX_MESSAGE_CHARS]
    if is_out_of_memory(exc):
        return "oom", one_line(exc)
    if is_no_kernel(exc):
        return "unsupported", one_line(exc)
    return "error", one_line(exc)


def failure_reason_code(exc: BaseException) -> str | None:
    """The reason code of an ``unsupported`` failure (:class:`ReasonCode`); None (an empty cell) for any other."""
    if isinstance(exc, UnsupportedError):
        return exc.code.value
    if not is_out_of_memory(exc) and is_no_kernel(exc):
        return ReasonCode.NO_KERNEL.value
    return None
