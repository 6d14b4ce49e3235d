"""The one registry of attention implementations, filled by the ``@register`` decorator.

Modelled on tritonbench's decorator-registered backends: an implementation is a factory
``(weights, heads, causal) -> nn.Module`` plus the facts the runner needs about it (which
bytes-moved model describes it, whether it is in the default set).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

import torch
from torch import nn

from mhabench.errors import RegistryError, UnknownImplementationError
from mhabench.weights import AttentionWeights

Factory = Callable[[AttentionWeights, int, bool], nn.Module]
ReferenceFn = Callable[[AttentionWeights, torch.Tensor, int, bool], torch.Tensor]
Traffic = Literal["materialized", "per_head", "fused", "shared_qk", "unscaled", "additive", "full_dim_heads"]


@dataclasses.dataclass(frozen=True)
class ImplSpec:
    """What the registry knows about one implementation."""

    name: str
    factory: Factory
    description: str
    traffic: Traffic
    core: bool
    reference: ReferenceFn | None = None
    """float64 reference of the function this implementation computes; None = standard MHA."""
    compiles: bool = False
    """True when the first call triggers ``torch.compile``: the runner times it as ``compile_time_s``."""


_REGISTRY: dict[str, ImplSpec] = {}


def register(
    name: str,
    *,
    description: str,
    traffic: Traffic = "fused",
    core: bool = False,
    reference: ReferenceFn | None = None,
    compiles: bool = False,
) -> Callable[[Factory], Factory]:
    """Class/function decorator: register ``factory`` under ``name`` (duplicates are an error).

    ``traffic`` names the bytes-moved model in :mod:`mhabench.measure.cost` that describes the
    implementation; ``core`` puts it in the default set that a config without
    ``implementations:`` runs; ``reference`` is the float64 function an ablation that computes
    something other than standard attention is checked against; ``compiles`` marks a factory whose
    module compiles on its first call.
    """

    def decorator(factory: Factory) -> Factory:
        if name in _REGISTRY:
            raise RegistryError(f"implementation {name!r} is already registered")
        _REGISTRY[name] = ImplSpec(name, factory, description, traffic, core, reference=reference, compiles=compiles)
        return factory

    return decorator


def get_spec(name: str) -> ImplSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise UnknownImplementationError(f"unknown implementation {name!r}; known: {known}") from None


def available_implementations() -> list[str]:
    """Every registered name, in registration order."""
    return list(_REGISTRY)


def core_implementations() -> list[str]:
    """The implementations a config runs when it does not name any."""
    return [spec.name for spec in _REGISTRY.values() if spec.core]


def build(name: str, weights: AttentionWeights, heads: int, causal: bool = False) -> nn.Module:
    """Instantiate implementation ``name`` on ``weights``; ``forward(x)`` maps (b, n, D) → (b, n, D)."""
    return get_spec(name).factory(weights, heads, causal)
