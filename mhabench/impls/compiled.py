"""``compiled``: ``torch.compile`` of ``naive`` — how much of the fused kernels' gain a compiler recovers.

Compilation happens on the first call; the runner times that call as ``compile_time_s`` and keeps it
out of the latency. Every compiled module starts from an empty Dynamo cache and static shapes, so
each case gets its own graph: no silent reuse of a dynamic-shape graph and no hitting Dynamo's
recompile limit (after which it would quietly run eager).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

from mhabench import cost
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.naive import NaiveAttention
from mhabench.impls.registry import register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern

F = TypeVar("F", bound=Callable[..., torch.Tensor])


def compile_fresh(fn: F) -> F:
    """``torch.compile(fn, dynamic=False)`` after clearing Dynamo's caches; unsupported platforms raise."""
    import torch._dynamo  # deferred, like every Dynamo import here: it costs seconds at `import mhabench`

    if not torch._dynamo.is_dynamo_supported():
        raise UnsupportedError(
            f"torch.compile is not supported on this platform (torch {torch.__version__})", ReasonCode.PLATFORM
        )
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


def compile_failure(exc: Exception, device: torch.device) -> UnsupportedError:
    """The one-line reason a backend compile failed (no C++ compiler, no kernel for this dtype, …)."""
    inner = getattr(exc, "inner_exception", exc)
    reason = str(inner).strip().splitlines() or [type(inner).__name__]
    return UnsupportedError(f"torch.compile (inductor) failed on {device.type}: {reason[0]}")


def unimplemented(exc: NotImplementedError, device: torch.device) -> UnsupportedError:
    """What torch has not implemented for this input (FlexAttention's backward on the CPU, as of 2.13), as
    an ``unsupported`` reason in torch's words."""
    reason = str(exc).strip().split(". ")[0]
    return UnsupportedError(f"torch {torch.__version__} on {device.type}: {reason}")


class CompiledModule(nn.Module):
    """``torch.compile(module)`` whose compiler failures surface as :class:`UnsupportedError`."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.compiled = compile_fresh(module)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._dynamo.exc import BackendCompilerFailed

        try:
            return self.compiled(x)
        except BackendCompilerFailed as exc:
            raise compile_failure(exc, x.device) from None


@register(
    "compiled",
    description="torch.compile(naive) with inductor; first-call compile time in compile_time_s",
    cost=cost.MATERIALIZED,
    compiles=True,
)
def compiled_naive(weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> nn.Module:
    return CompiledModule(NaiveAttention(weights, heads, pattern))
