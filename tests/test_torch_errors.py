"""classify_failure and is_sticky_cuda_error against the texts torch and the CUDA libraries really raise."""

from __future__ import annotations

import pytest
import torch

from mhabench.errors import UnsupportedError
from mhabench.torch_errors import MAX_MESSAGE_CHARS, classify_failure, is_sticky_cuda_error, one_line

OOM_MESSAGES = [
    "CUDA out of memory. Tried to allocate 64.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.2 GiB is "
    "free. Including non-PyTorch memory, this process has 77.8 GiB memory in use.",
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
    "cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "cuDNN error: CUDNN_STATUS_NOT_ENOUGH_WORKSPACE",
    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate "
    "57600000000 bytes. Error code 12 (Cannot allocate memory)",
]
NO_KERNEL_MESSAGES = [
    "No available kernel.  Aborting execution.",
    "No viable backend for scaled_dot_product_attention was found.",
    "cuDNN Frontend error: [cudnn_frontend] Error: No execution plans support the graph.",
    "CUDA error: no kernel image is available for execution on the device",
]
STICKY_MESSAGES = [
    "CUDA error: an illegal memory access was encountered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
    "assertions.",
    "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported",
    "CUDA error: unspecified launch failure",
    "CUDA error: misaligned address",
    "CUDA error: an illegal instruction was encountered",
]


@pytest.mark.parametrize("text", OOM_MESSAGES)
def test_memory_exhaustion_texts_are_oom(text: str) -> None:
    status, message = classify_failure(RuntimeError(text))
    assert status == "oom"
    assert message.startswith("RuntimeError: ") and "\n" not in message


def test_oom_exception_types_are_oom_whatever_the_text() -> None:
    assert classify_failure(torch.OutOfMemoryError("anything"))[0] == "oom"
    assert classify_failure(MemoryError())[0] == "oom"


@pytest.mark.parametrize("text", NO_KERNEL_MESSAGES)
def test_no_kernel_texts_are_unsupported(text: str) -> None:
    assert classify_failure(RuntimeError(text))[0] == "unsupported"


def test_unsupported_error_keeps_its_own_first_line_without_the_type() -> None:
    assert classify_failure(UnsupportedError("flash_attn: not installed\ndetail")) == (
        "unsupported",
        "flash_attn: not installed",
    )


@pytest.mark.parametrize("text", STICKY_MESSAGES)
def test_sticky_cuda_errors_are_errors_and_sticky(text: str) -> None:
    exc = torch.AcceleratorError(text) if hasattr(torch, "AcceleratorError") else RuntimeError(text)
    assert classify_failure(exc)[0] == "error"
    assert is_sticky_cuda_error(exc)
    assert is_sticky_cuda_error(RuntimeError(text))


@pytest.mark.parametrize("text", [*OOM_MESSAGES, *NO_KERNEL_MESSAGES, "shape mismatch: (2, 3) vs (3, 2)"])
def test_recoverable_failures_are_not_sticky(text: str) -> None:
    assert not is_sticky_cuda_error(RuntimeError(text))
    assert not is_sticky_cuda_error(torch.OutOfMemoryError(text))


def test_other_exceptions_are_errors_with_one_short_line() -> None:
    status, message = classify_failure(ValueError("bad value\nsecond line"))
    assert (status, message) == ("error", "ValueError: bad value")
    assert len(one_line(RuntimeError("x" * 5000))) == MAX_MESSAGE_CHARS
    assert one_line(KeyError()) == "KeyError"
    assert classify_failure(ValueError("out of memory"))[0] == "error"  # only RuntimeErrors carry library texts
