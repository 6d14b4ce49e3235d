"""Workload modes: what the one timed call of a (case, implementation) does.

- ``phase: prefill`` + ``mode: forward`` (the default): ``module(x)`` on the whole sequence.
- ``phase: decode``: one new token per sequence against a KV cache holding ``seq_len`` tokens.
  The cache is filled (and allocated with room for the new token) before timing; the timed step
  projects the new token, writes its K/V into the preallocated slot and attends over the cache.
  Only implementations with ``project_kv`` and ``decode_step`` (naive, per_head, fused) can decode;
  the others get an ``unsupported`` row. Checked against the last row of causal attention over the
  seq_len + 1 tokens.
- ``mode: train``: forward + backward, with the input and every weight tensor the module holds
  requiring grad; gradients come from ``torch.autograd.grad`` so each call allocates them afresh
  and the peak memory includes them. The step turns autograd on itself (leaving any
  ``no_grad``/``inference_mode`` the runner wraps around calls), so the runner needs no mode logic.

The runner stays mode-agnostic: it asks :func:`prepare` for a :class:`Step` and calls ``step.run``
wherever it called the module before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from mhabench.config import DTYPES, Case
from mhabench.errors import UnsupportedError
from mhabench.impls import build
from mhabench.impls.kv_cache import KVCache
from mhabench.impls.registry import ImplSpec, ReferenceFn
from mhabench.measure.cost import Workload
from mhabench.reference import decode_reference, reference_attention
from mhabench.weights import AttentionWeights

DECODE_IMPLEMENTATIONS_HINT = "decode needs project_kv and decode_step (naive, per_head, fused have them)"


@dataclasses.dataclass(frozen=True)
class Step:
    """The timed call of one (case, implementation) and how autograd must be set around it."""

    run: Callable[[], torch.Tensor]
    """Does the work and returns the attention output (detached) that is checked."""
    columns: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Extra row columns this mode knows before timing (e.g. ``kv_cache_bytes``)."""


def workload(case: Case) -> Workload:
    """The attention shape a case runs: decode is 1 query against seq_len + 1 keys."""
    decode = case.phase == "decode"
    return Workload(
        batch=case.batch,
        seq_len=1 if decode else case.seq_len,
        kv_len=case.seq_len + 1 if decode else case.seq_len,
        d_model=case.d_model,
        heads=case.heads,
        kv_heads=case.kv_heads,
        causal=case.causal and not decode,
        element_bytes=DTYPES[case.dtype].itemsize,
        train=case.mode == "train",
    )


def input_len(case: Case) -> int:
    """Tokens of the case's input: decode needs the cached prefix plus the new token."""
    return case.seq_len + 1 if case.phase == "decode" else case.seq_len


def reference_fn(spec: ImplSpec, case: Case) -> ReferenceFn:
    """The float64 function ``spec``'s output is checked against in this case."""
    if case.phase == "decode":
        return decode_reference
    return spec.reference or reference_attention


def prepare(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    """Build ``spec`` for ``case`` and return it with the step to check, measure and time."""
    if case.phase == "decode":
        return _decode(spec, case, weights, x)
    if case.mode == "train":
        return _train(spec, case, weights, x)
    module = build(spec.name, weights, case.heads, case.causal)
    return module, Step(run=lambda: module(x))


def _decode(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    module = build(spec.name, weights, case.heads, case.causal)
    if not (hasattr(module, "project_kv") and hasattr(module, "decode_step")):
        raise UnsupportedError(f"phase decode: {spec.name} has no KV-cache decode step; {DECODE_IMPLEMENTATIONS_HINT}")
    prefix, new_token = x[:, :-1], x[:, -1:]
    with torch.no_grad():
        cache = KVCache.prefill(*module.project_kv(prefix))
    return module, Step(run=lambda: module.decode_step(new_token, cache), columns={"kv_cache_bytes": cache.nbytes})


def _train(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> tuple[nn.Module, Step]:
    """Forward + backward w.r.t. the input and the module's own weight tensors (its layout: packed for fused)."""
    module = build(spec.name, _detached(weights), case.heads, case.causal)
    leaves = [x.detach().requires_grad_(), *(t.requires_grad_() for t in weight_tensors(module))]
    generator = torch.Generator().manual_seed(case.seed + 2)
    grad_output = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(dtype=x.dtype, device=x.device)

    def run() -> torch.Tensor:
        with torch.inference_mode(False), torch.enable_grad():
            out = module(leaves[0])
            torch.autograd.grad(out, leaves, grad_output, allow_unused=True)
        return out.detach()

    return module, Step(run=run)


def _detached(weights: AttentionWeights) -> AttentionWeights:
    """The same numbers in new tensor objects, so marking a module's weights trainable stays local to it."""
    return dataclasses.replace(
        weights,
        **{f.name: t.detach() for f in dataclasses.fields(weights) if (t := getattr(weights, f.name)) is not None},
    )


def weight_tensors(module: nn.Module) -> list[torch.Tensor]:
    """Every distinct floating-point tensor ``module`` holds: parameters and plain tensor attributes.

    Implementations keep weights as plain attributes (lists of per-head blocks, packed matrices,
    an :class:`AttentionWeights`) rather than ``nn.Parameter``; this finds them all, once each.
    """
    found: dict[int, torch.Tensor] = {id(p): p for p in module.parameters()}
    for sub in module.modules():
        for name, value in vars(sub).items():
            if not name.startswith("_"):
                for tensor in _tensors_in(value):
                    found.setdefault(id(tensor), tensor)
    return list(found.values())


def _tensors_in(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors_in(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _tensors_in(getattr(value, field.name))


def parameter_count(module: nn.Module) -> int:
    """Scalars in the weights the module holds (what seed 001 compares between layouts)."""
    return sum(t.numel() for t in weight_tensors(module))
