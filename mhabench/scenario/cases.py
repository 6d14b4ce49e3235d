"""Cases: a validated config expanded into the fully resolved points of its sweeps.

Each scenario expands to the cartesian product of its list fields (dtype outermost), one
:class:`Case` per combination, and each case has a stable ``case_id`` that rows, resume and
compare key on.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import torch

from mhabench.scenario.config import SWEEP_FIELDS, RunConfig, ScenarioSpec
from mhabench.scenario.device import resolve_dtype


@dataclasses.dataclass(frozen=True)
class Case:
    """One fully resolved point of a sweep: everything needed to build and run the layers."""

    scenario: str
    batch: int
    seq_len: int
    d_model: int
    heads: int
    causal: bool
    bias: bool
    dtype: str
    seed: int
    kv_heads: int | None = None
    """Key/value heads; None (the default) means ``heads``, i.e. plain multi-head attention."""
    mode: str = "forward"
    phase: str = "prefill"
    tensor_parallel: int = 1
    """Ranks the heads are split across; 1 = one device."""

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def case_id(self) -> str:
        kv = f"-kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        kv += f"-tp{self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        flags = "".join(f"-{flag}" for flag in ("causal", "bias") if getattr(self, flag))
        flags += "".join(f"-{value}" for value in (self.mode, self.phase) if value not in ("forward", "prefill"))
        return f"{self.scenario}/b{self.batch}-n{self.seq_len}-d{self.d_model}-h{self.heads}{kv}-{self.dtype}{flags}"


def _dtypes(config: RunConfig, device: torch.device) -> list[str]:
    return list(dict.fromkeys(resolve_dtype(d, device) for d in config.dtype))


def _axes(spec: ScenarioSpec) -> list[list[Any]]:
    return [getattr(spec, field) or [None] for field in SWEEP_FIELDS]  # kv_heads None → one "same as heads"


def count_cases(config: RunConfig, device: torch.device) -> int:
    """How many cases :func:`expand_cases` would return, without building them (a sweep may be huge)."""
    return len(_dtypes(config, device)) * sum(math.prod(map(len, _axes(spec))) for spec in config.scenarios)


def expand_cases(config: RunConfig, device: torch.device) -> list[Case]:
    """Every case of every scenario, in file order, each sweep in cartesian-product order (dtype outermost)."""
    cases = []
    for spec in config.scenarios:
        for dtype, values in itertools.product(_dtypes(config, device), itertools.product(*_axes(spec))):
            fields = dict(zip(SWEEP_FIELDS, values, strict=True))
            cases.append(Case(scenario=spec.name, dtype=dtype, seed=spec.seed, **fields))
    return cases
