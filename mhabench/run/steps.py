"""Workload modes: what the one timed call of a (case, implementation) does.

- ``phase: prefill`` + ``mode: forward`` (the default): ``module(x)`` on the whole sequence.
- ``phase: decode``: one new token per sequence against a KV cache holding ``seq_len`` tokens.
  The cache is filled (and allocated with room for the new token) before timing; the timed step
  projects the new token, writes its K/V into the preallocated slot and attends over the cache.
  Implementations whose capabilities include ``decode`` have ``project_kv`` and ``decode_step``
  (:class:`Decoder`); the runner gives the others an ``unsupported`` row before building them.
  Checked against the last row of causal attention over the seq_len + 1 tokens.
- ``mode: train``: forward + backward, with the input and the module's parameters requiring grad;
  gradients come from ``torch.autograd.grad`` so each call allocates them afresh and the peak
  memory includes them. The step turns autograd on itself (leaving any
  ``no_grad``/``inference_mode`` the runner wraps around calls), so the runner needs no mode logic.

The runner stays mode-agnostic: it asks :func:`prepare` for a :class:`Step` and calls ``step.run``
wherever it called the module before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

import torch
from torch import nn

from mhabench.impls import build
from mhabench.impls.base import AttentionModule
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import ImplSpec
from mhabench.impls.weights import AttentionWeights
from mhabench.scenario.cases import Case


class Decoder(Protocol):
    """What ``Capabilities(decode=True)`` promises the module has."""

    def project_kv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def decode_step(self, x: torch.Tensor, cache: KVCache) -> torch.Tensor: ...


@dataclasses.dataclass(frozen=True)
class Step:
    """The timed call of one (case, implementation) and how autograd must be set around it."""

    run: Callable[[], torch.Tensor]
    """Does the work and returns the attention output (detached) that is checked."""
    kv_cache_bytes: int | None = None
    """Bytes of the decode KV cache (None outside ``phase: decode``)."""


def input_shape(case: Case) -> tuple[int, int]:
    """(rows, tokens) of the case's input: decode needs the cached prefix plus the new token; packed
    documents are one row."""
    if case.phase == "decode":
        return case.batch, case.seq_len + 1
    return case.pattern.input_shape(case.batch, case.seq_len)


def prepare(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    """Build ``spec`` for ``case`` and return it with the step to check, measure and time."""
    if case.phase == "decode":
        return _decode(spec, case, weights, x)
    if case.mode == "train":
        return _train(spec, case, weights, x)
    module = _built(spec, case, weights, x)
    return module, Step(run=lambda: module(x))


def _built(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> nn.Module:
    """The module, with what a model builds once per batch (its masks) built before the first call: the
    checked call's counted ops and the timed calls are the attention's alone."""
    module = build(spec.name, weights, case.heads, case.pattern)
    if isinstance(module, AttentionModule):
        shape = case.workload()
        with torch.no_grad():
            module.prepare_masks(shape.batch, shape.seq_len, shape.kv_len, x)
    return module


def _decode(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    module: Decoder = _built(spec, case, weights, x)  # type: ignore[assignment]
    prefix, new_token = x[:, :-1], x[:, -1:]
    with torch.no_grad():
        cache = KVCache.prefill(*module.project_kv(prefix))
    return module, Step(run=lambda: module.decode_step(new_token, cache), kv_cache_bytes=cache.nbytes)  # type: ignore[return-value]


def _train(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    """Forward + backward w.r.t. the input and the module's own parameters (its layout: packed for fused)."""
    module = _built(spec, case, weights, x)
    leaves = [x.detach().requires_grad_(), *(p.requires_grad_() for p in module.parameters())]
    # drawn where it is used, in float32, like the input (a host float64 draw at GPU sizes takes seconds)
    generator = torch.Generator(device=x.device).manual_seed(case.seed + 2)
    grad_output = torch.randn(x.shape, generator=generator, dtype=torch.float32, device=x.device).to(dtype=x.dtype)

    def run() -> torch.Tensor:
        with torch.inference_mode(False), torch.enable_grad():
            out = module(leaves[0])
            torch.autograd.grad(out, leaves, grad_output, allow_unused=True)
        return out.detach()

    return module, Step(run=run)


def parameter_count(module: nn.Module) -> int:
    """Scalars in the module's own weights: packed or per-head layouts of one weight set count the same."""
    return sum(p.numel() for p in module.parameters())
