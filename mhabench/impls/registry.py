"""The one registry of attention implementations, filled by the ``@register`` decorator.

Modelled on tritonbench's decorator-registered backends: an implementation is a factory
``(weights, heads, pattern) -> nn.Module`` plus what the runner needs to know before it builds one:
the cost model that prices a workload (:class:`mhabench.cost.CostModel`) and the
:class:`Capabilities` it has. The runner asks :meth:`Capabilities.unsupported_reason` up front, so a
case an implementation cannot run becomes an ``unsupported`` row without building anything.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any, get_args

import torch
from torch import nn

from mhabench.cost import CostModel, Workload
from mhabench.errors import ReasonCode, Refusal, RegistryError, UnknownImplementationError, UnsupportedError
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, PLAIN_MASKS, AttentionPattern, Layout, MaskName, ScoreModName, as_pattern, say_once

Factory = Callable[[AttentionWeights, int, AttentionPattern], nn.Module]
ReferenceFn = Callable[[AttentionWeights, torch.Tensor, int, AttentionPattern], torch.Tensor]

BOOL_CAUSAL_FACTORY = (
    "a factory taking (weights, heads, causal) is deprecated: take (weights, heads, pattern), an "
    "mhabench.pattern.AttentionPattern (pattern.causal is the old flag)"
)
BOOL_CAUSAL_REFERENCE = (
    "a reference taking (weights, x, heads, causal) is deprecated: take (weights, x, heads, pattern), an "
    "mhabench.pattern.AttentionPattern (pattern.causal is the old flag)"
)

INSTALL_HINTS = {"transformers": "make hf installs it: the hf extra"}
"""How to get a missing package this project installs itself, so an ``unsupported`` row says what to run."""


def install_hint(missing: list[str]) -> str:
    """`` (make hf installs it …)`` for the first missing package we know how to install, else nothing."""
    hints = [INSTALL_HINTS[package] for package in missing if package in INSTALL_HINTS]
    return f" ({hints[0]})" if hints else ""


ALL_DEVICES = frozenset({"cpu", "cuda"})
ALL_DTYPES = frozenset({"float32", "float16", "bfloat16"})


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an implementation can run. Anything outside it becomes an ``unsupported`` row with the reason."""

    grouped_kv: bool = True
    """kv_heads < heads (grouped-query / multi-query attention)."""
    decode: bool = False
    """``phase: decode``: the module has ``project_kv(x)`` and ``decode_step(x, cache)``."""
    train: bool = True
    """``mode: train`` (forward + backward)."""
    devices: frozenset[str] = ALL_DEVICES
    dtypes: frozenset[str] = ALL_DTYPES
    requires: tuple[str, ...] = ()
    """Importable packages it needs (an optional peer such as ``flash_attn``)."""
    own_head_dim: bool = True
    """A ``head_dim`` set apart from d_model / heads (query width heads·head_dim ≠ d_model)."""
    max_head_dim: int | None = None
    """The widest head its kernel has (FlashAttention-2: 256); None = no limit."""
    masks: frozenset[str] = PLAIN_MASKS
    """Masks it runs (:mod:`mhabench.pattern`); every implementation runs none and causal."""
    score_mods: frozenset[str] = frozenset({"none"})
    layouts: frozenset[str] = frozenset()
    """Document layouts it runs (``padded``, ``packed``); empty: equal-length rows only."""
    decode_window: bool = False
    """``phase: decode`` with a sliding window: the step attends over the last ``window`` cached keys."""

    def unsupported_reason(self, name: str, shape: Workload, *, dtype: str, device_type: str) -> Refusal | None:
        """Why ``name`` cannot run ``shape`` (a case's :meth:`~mhabench.scenario.cases.Case.workload`) in ``dtype`` on
        ``device_type``, or None when it can: the first capability the case needs and it lacks, a text that carries
        its :class:`ReasonCode`."""
        missing = [package for package in self.requires if importlib.util.find_spec(package) is None]
        heads, kv_heads, head_dim = shape.heads, shape.kv_heads, shape.head_dim
        apart = heads * head_dim != shape.d_model
        too_wide = self.max_head_dim is not None and head_dim > self.max_head_dim
        checks = [
            (bool(missing), ReasonCode.NOT_INSTALLED, f"{', '.join(missing)} not installed{install_hint(missing)}"),
            (
                device_type not in self.devices,
                ReasonCode.DEVICE,
                f"runs on {'/'.join(sorted(self.devices))} only, not {device_type}",
            ),
            (
                dtype not in self.dtypes,
                ReasonCode.DTYPE,
                f"no {dtype} support (dtypes: {', '.join(sorted(self.dtypes))})",
            ),
            (
                kv_heads != heads and not self.grouped_kv,
                ReasonCode.GROUPED_KV,
                f"no grouped K/V heads (kv_heads {kv_heads} < heads {heads})",
            ),
            (shape.decode and not self.decode, ReasonCode.DECODE, "no KV-cache decode step"),
            (shape.train and not self.train, ReasonCode.BACKWARD, "no backward pass"),
            (
                apart and not self.own_head_dim,
                ReasonCode.HEAD_DIM,
                f"no head_dim apart from d_model / heads ({heads} × {head_dim} ≠ {shape.d_model})",
            ),
            (too_wide, ReasonCode.HEAD_DIM_TOO_WIDE, f"head_dim {head_dim} > {self.max_head_dim} has no kernel"),
            *self._pattern_checks(shape.pattern, shape.decode),
        ]
        return next((Refusal(f"{name}: {reason}", code) for failed, code, reason in checks if failed), None)

    def _pattern_checks(self, pattern: AttentionPattern, decode: bool) -> list[tuple[bool, ReasonCode, str]]:
        """(fails, code, reason) for the mask, documents and score modifier of a case."""
        layout = pattern.layout if pattern.lengths is not None else None
        return [
            (
                pattern.mask not in self.masks,
                ReasonCode.MASK,
                f"no {pattern.mask} mask (masks: {', '.join(sorted(self.masks))})",
            ),
            (
                layout is not None and layout not in self.layouts,
                ReasonCode.DOCUMENTS,
                f"no {layout} documents (varying lengths)",
            ),
            (pattern.score_mod not in self.score_mods, ReasonCode.SCORE_MOD, f"no {pattern.score_mod} score modifier"),
            (
                decode and pattern.mask == "sliding_window" and not self.decode_window,
                ReasonCode.DECODE_WINDOW,
                "no windowed decode step",
            ),
        ]


EVERY_PATTERN: dict[str, Any] = {
    "masks": frozenset(get_args(MaskName)),
    "score_mods": frozenset(get_args(ScoreModName)),
    "layouts": frozenset(get_args(Layout)),
    "decode_window": True,
}
"""The capabilities of an implementation that takes the dense mask and bias tensors (every pattern)."""


def optional_import(module: str) -> ModuleType:
    """An optional peer's package, imported on first use (importing a GPU kernel package initialises CUDA).

    Missing, it is an ``unsupported`` row naming the package, never an error.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UnsupportedError(f"{module.split('.')[0]}: not installed ({exc})", ReasonCode.NOT_INSTALLED) from None


@dataclasses.dataclass(frozen=True)
class ImplSpec:
    """What the registry knows about one implementation."""

    name: str
    factory: Factory
    description: str
    cost: CostModel | None
    """Prices a workload; None for a plugin that declared none (its modelled columns stay empty)."""
    capabilities: Capabilities
    core: bool
    reference: ReferenceFn | None = None
    """float64 reference of the function this implementation computes; None = standard MHA."""
    compiles: bool = False
    """True when the first call triggers ``torch.compile``: the runner times it as ``compile_time_s``."""
    compute_dtype: str | None = None
    """The dtype it computes in when that is not the case's (``fused_fp8``: bf16 at the edges, e4m3 inside):
    its output is checked under that dtype's tolerance and its row placed on that dtype's roof. None: the case's."""
    bool_causal: bool = False
    """Its factory was written before patterns, ``(weights, heads, causal)``: a plain pattern reaches it as the bool
    ``causal`` (deprecated, :func:`takes_bool_causal`)."""


_REGISTRY: dict[str, ImplSpec] = {}


def register(
    name: str,
    *,
    description: str,
    cost: CostModel | None = None,
    capabilities: Capabilities = Capabilities(),
    core: bool = False,
    reference: ReferenceFn | None = None,
    compiles: bool = False,
    compute_dtype: str | None = None,
) -> Callable[[Factory], Factory]:
    """Class/function decorator: register ``factory`` under ``name`` (duplicates are an error).

    ``cost`` prices a workload (a :class:`CostModel` from :mod:`mhabench.cost`, or None
    when unknown); ``capabilities`` says what it can run; ``core`` puts it in the default set that a
    config without ``implementations:`` runs; ``reference`` is the float64 function an ablation that
    computes something other than standard attention is checked against; ``compiles`` marks a
    factory whose module compiles on its first call; ``compute_dtype`` names the dtype it computes in
    when that is not the case's (its tolerance and its roof).
    """

    def decorator(factory: Factory) -> Factory:
        if name in _REGISTRY:
            raise RegistryError(f"implementation {name!r} is already registered")
        bool_causal = takes_bool_causal(factory, 2)
        if bool_causal:
            say_once(f"{name}: {BOOL_CAUSAL_FACTORY}")
        checked_against = reference
        if reference is not None and takes_bool_causal(reference, 3):
            say_once(f"{name}: {BOOL_CAUSAL_REFERENCE}")
            checked_against = given_bool_causal(reference)
        _REGISTRY[name] = ImplSpec(
            name, factory, description, cost, capabilities, core, checked_against, compiles, compute_dtype, bool_causal
        )
        return factory

    return decorator


def rename(name: str, new_name: str) -> None:
    """Hold ``name``'s implementation under ``new_name`` instead: two versions of one plugin, side by side."""
    if new_name in _REGISTRY:
        raise RegistryError(f"implementation {new_name!r} is already registered")
    _REGISTRY[new_name] = dataclasses.replace(_REGISTRY.pop(name), name=new_name)


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


def build(
    name: str,
    weights: AttentionWeights,
    heads: int,
    pattern: AttentionPattern = PLAIN,
    *,
    causal: bool | None = None,
) -> nn.Module:
    """Instantiate implementation ``name`` on ``weights`` for ``pattern``; ``forward(x)`` maps (b, n, D) → (b, n, D).

    ``causal=True/False`` (the argument before patterns) still works and is deprecated (:func:`as_pattern`). A
    factory written before patterns (:attr:`ImplSpec.bool_causal`) gets a plain pattern as that bool; any other
    pattern reaches only an implementation whose capabilities declared it, as the pattern.
    """
    pattern = as_pattern(pattern if causal is None else causal)
    spec = get_spec(name)
    if spec.bool_causal and pattern.plain:
        return spec.factory(weights, heads, pattern.causal)  # type: ignore[arg-type]  # the bool it was written for
    return spec.factory(weights, heads, pattern)


def takes_bool_causal(function: Callable[..., object], position: int) -> bool:
    """Whether ``function`` (a factory: ``position`` 2, a ``reference=``: 3) was written before patterns: that
    parameter is still named ``causal``, the bool it expects for none/causal (a built-in's is ``pattern``)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without an introspectable signature: the current protocol
        return False
    return len(parameters) > position and parameters[position].name == "causal"


def given_bool_causal(reference: Callable[..., torch.Tensor]) -> ReferenceFn:
    """A ``reference=`` written before patterns, handed the bool it expects: an ablation's reference runs the plain
    patterns its capabilities allow, where ``pattern.causal`` is all there is."""

    def with_bool(weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern) -> torch.Tensor:
        return reference(weights, x, heads, pattern.causal)

    return with_bool
