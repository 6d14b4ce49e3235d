"""Probe files: the scenario fields of ``mhabench run`` plus ``claims:``, ``samples:`` and ``weights:``.

A probe scenario is a :class:`mhabench.scenario.config.ScenarioSpec` (same fields, same sweeps, same
checks) that also lists the claims to test. Probes measure bidirectional prefill attention on one
device, so the fields that only matter to timing (``mode``, ``phase``, ``causal``,
``tensor_parallel``, …) must keep their defaults; anything else is one line naming the field.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mhabench.errors import ConfigError, describe_validation_error
from mhabench.scenario.config import ScenarioSpec
from mhabench.scenario.limits import check_document_size
from mhabench.scenario.loading import read_yaml

ClaimGroup = Literal["var_qk", "saturation", "rank", "diagonal", "jl", "equivalence", "trained"]
PROBE_FIELDS = frozenset({"name", "batch", "seq_len", "d_model", "heads", "kv_heads", "head_dim", "bias", "seed"})
"""The ScenarioSpec fields a probe uses; every other one must keep its default."""


class WeightsFile(BaseModel):
    """Pretrained attention weights in a ``.safetensors`` file; the defaults name GPT-2 small's tensors.

    ``{layer}`` in a key is the layer index. ``qkv`` is (D, 3·D) and ``out`` (D, D), both applied as
    ``x @ w`` (GPT-2's Conv1D layout). Tokens come from ``embeddings`` (+ ``positions``), normalised by
    the layer's ``norm`` (``<norm>.weight`` / ``<norm>.bias``) when given; null drops an optional key.
    """

    model_config = ConfigDict(extra="forbid")

    path: Path
    layers: list[Annotated[int, Field(ge=0)]] | None = Field(None, description="layer indices; default: all")
    qkv: str = "h.{layer}.attn.c_attn.weight"
    qkv_bias: str | None = "h.{layer}.attn.c_attn.bias"
    out: str = "h.{layer}.attn.c_proj.weight"
    out_bias: str | None = "h.{layer}.attn.c_proj.bias"
    embeddings: str = "wte.weight"
    positions: str | None = "wpe.weight"
    norm: str | None = "h.{layer}.ln_1"


class ProbeScenario(ScenarioSpec):
    """One scenario of a probe file; list-valued fields sweep as in ``mhabench run``."""

    claims: list[ClaimGroup] = Field(min_length=1, description="claim groups to test on every case")
    samples: int = Field(8, ge=1, le=10_000, strict=True, description="independent input draws per case")
    weights: WeightsFile | None = Field(None, description="pretrained weights; default: seeded random ones")

    @model_validator(mode="after")
    def _only_probe_fields(self) -> ProbeScenario:
        """Timing-only fields cannot change a probe; a non-default value would be silently ignored."""
        for name in sorted(self.model_fields_set - PROBE_FIELDS - {"claims", "samples", "weights"}):
            if getattr(self, name) != ScenarioSpec.model_fields[name].get_default(call_default_factory=True):
                raise ValueError(f"{name}: a probe measures bidirectional prefill attention; leave {name} out")
        if self.weights is not None and {"bias", "kv_heads", "head_dim"} & self.model_fields_set:
            raise ValueError("bias, kv_heads and head_dim come from the weights file; leave them out")
        return self


class ProbeConfig(BaseModel):
    """A whole probe file."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    scenarios: list[ProbeScenario] = Field(min_length=1)


@dataclasses.dataclass(frozen=True)
class ProbeCase:
    """One point of a probe sweep."""

    scenario: str
    batch: int
    seq_len: int
    d_model: int
    heads: int
    kv_heads: int
    bias: bool
    seed: int
    samples: int
    claims: tuple[str, ...]
    weights: WeightsFile | None = None
    head_dim: int | None = None
    """Width of one head; None (the default) means d_model / heads."""

    def __post_init__(self) -> None:
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.d_model // self.heads)

    @property
    def trained(self) -> bool:
        return self.weights is not None

    @property
    def case_id(self) -> str:
        kv = f"-hd{self.head_dim}" if self.heads * self.head_dim != self.d_model else ""
        kv += f"-kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        source = f"-{self.weights.path.stem}" if self.weights else "-bias" if self.bias else ""
        return f"{self.scenario}/b{self.batch}-n{self.seq_len}-d{self.d_model}-h{self.heads}{kv}{source}"


def expand(spec: ProbeScenario) -> list[ProbeCase]:
    """Every case of one scenario, in cartesian-product order."""
    return [
        ProbeCase(
            spec.name,
            batch,
            seq_len,
            d_model,
            heads,
            kv_heads or heads,
            bias,
            spec.seed,
            spec.samples,
            tuple(dict.fromkeys(spec.claims)),
            spec.weights,
            head_dim,
        )
        for batch, seq_len, d_model, heads, kv_heads, head_dim, bias in itertools.product(
            spec.batch,
            spec.seq_len,
            spec.d_model,
            spec.heads,
            spec.kv_heads or [None],
            spec.head_dim or [None],
            spec.bias,
        )
    ]


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    """Fields beside ``loc``, for "did you mean"."""
    model: type[BaseModel] = ProbeConfig
    if len(loc) > 2 and loc[0] == "scenarios":
        model = WeightsFile if len(loc) > 3 and loc[2] == "weights" else ProbeScenario
    return list(model.model_fields)


def parse_probe_config(data: Any, source: str) -> ProbeConfig:
    """Validate parsed YAML; a weights path is relative to the file's folder, like a plugin's."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of fields, got {'nothing' if data is None else type(data).__name__}"
        )
    check_document_size(data, source)
    scenarios = data.get("scenarios")
    for index, scenario in enumerate(scenarios if isinstance(scenarios, list) else []):
        if isinstance(scenario, dict) and "model" in scenario:
            raise ConfigError(
                f"{source}: scenarios[{index}].model: a probe takes d_model, heads and head_dim, not a model"
            )
    try:
        config = ProbeConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, _known_fields, source)) from None
    for spec in config.scenarios:
        if spec.weights is not None:
            spec.weights.path = Path(source).parent / spec.weights.path
    return config if config.name else config.model_copy(update={"name": Path(source).stem})


def load_probe_config(path: Path) -> ProbeConfig:
    """Read one probe file with ``yaml.safe_load``; every problem is a one-line :class:`ConfigError`."""
    return parse_probe_config(read_yaml(path), str(path))
