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

from mhabench.pattern import CAUSAL_MASKS, AttentionPattern
from mhabench.scenario import lengths as doc_lengths
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
    head_dim: int | None = None
    """Width of one head; None (the default) means d_model / heads."""
    model: str | None = None
    """The model preset or config.json the scenario's shape came from (None when none)."""
    tensor_parallel: int = 1
    """Ranks the heads are split across; 1 = one device."""
    mask: str | None = None
    """The attention mask (:mod:`mhabench.pattern`); None: ``causal`` decides (causal or none)."""
    window: int = 0
    """sliding_window: keys each query sees (0: no window)."""
    prefix: int = 0
    """prefix_lm: the bidirectional prefix (0: none)."""
    lengths: str = "none"
    """Label of the documents' lengths (``none``: every row is a full-length sequence)."""
    layout: str = "none"
    """padded | packed with lengths; ``none`` without."""
    score_mod: str = "none"
    softcap: float = 0.0
    """softcap: the cap (0: no cap)."""
    documents: tuple[int, ...] | None = None
    """The document lengths the ``lengths`` label stands for."""

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.d_model // self.heads)
        if self.mask is None:
            object.__setattr__(self, "mask", "causal" if self.causal else "none")
        object.__setattr__(self, "causal", self.mask in CAUSAL_MASKS)

    @property
    def pattern(self) -> AttentionPattern:
        """What each query sees and how its scores are modified."""
        return AttentionPattern(
            mask=self.mask,  # type: ignore[arg-type]
            window=self.window or None,
            prefix=self.prefix or None,
            lengths=self.documents,
            layout="packed" if self.layout == "packed" else "padded",
            score_mod=self.score_mod,  # type: ignore[arg-type]
            softcap=self.softcap or None,
        )

    @property
    def own_head_dim(self) -> bool:
        """The heads are not d_model / heads wide (Gemma 2, Qwen3): W_q's width is heads·head_dim, not d_model."""
        return self.heads * self.head_dim != self.d_model

    @property
    def case_id(self) -> str:
        kv = f"-hd{self.head_dim}" if self.own_head_dim else ""  # absent otherwise: old case_ids stay
        kv += f"-kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        kv += f"-tp{self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        flags = "".join(f"-{flag}" for flag in ("causal", "bias") if getattr(self, flag))
        flags += "".join(f"-{value}" for value in (self.mode, self.phase) if value not in ("forward", "prefill"))
        flags += self._pattern_flags()
        return f"{self.scenario}/b{self.batch}-n{self.seq_len}-d{self.d_model}-h{self.heads}{kv}-{self.dtype}{flags}"

    def _pattern_flags(self) -> str:
        """Case-id tokens of a mask other than none/causal, of documents and of a score modifier."""
        flags = {
            "sliding_window": f"-window{self.window}",
            "prefix_lm": f"-prefix{self.prefix}",
            "document": "-document",
        }.get(self.mask or "", "")
        if self.documents is not None:
            flags += f"-len{self.lengths}-{self.layout}"
        if self.score_mod == "softcap":
            flags += f"-softcap{self.softcap:g}"
        elif self.score_mod == "alibi":
            flags += "-alibi"
        return flags


def _dtypes(config: RunConfig, device: torch.device) -> list[str]:
    return list(dict.fromkeys(resolve_dtype(d, device) for d in config.dtype))


def _axes(spec: ScenarioSpec) -> list[list[Any]]:
    # kv_heads None → one "same as heads"; mask None → causal decides; no window, lengths … → one None
    return [getattr(spec, field) or [None] for field in SWEEP_FIELDS]


def _pattern_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The case fields of one sweep point's pattern: a size applies to its own mask only, and lengths
    resolve against this point's seq_len."""
    spec, mask = fields.pop("lengths"), fields["mask"]
    if mask == "sliding_window" and fields["window"] >= keys_seen(fields["seq_len"], fields["phase"]):
        # the window covers every query's whole past: plain causal, per document with lengths (covered_windows)
        mask = fields["mask"] = "document" if spec is not None else "causal"
    pattern = {
        "window": fields.pop("window") if mask == "sliding_window" else 0,
        "prefix": fields.pop("prefix") if mask == "prefix_lm" else 0,
        "softcap": fields.pop("softcap") if fields["score_mod"] == "softcap" else 0.0,
        "layout": fields.pop("layout") if spec is not None else "none",
    }
    for name in ("window", "prefix", "softcap", "layout"):
        fields.pop(name, None)
    if spec is not None:
        pattern |= {"lengths": doc_lengths.label(spec), "documents": doc_lengths.resolve(spec, fields["seq_len"])}
        fields["batch"] = len(pattern["documents"])
    if mask is None:
        fields.pop("mask")
    return fields | pattern


def keys_seen(seq_len: int, phase: str) -> int:
    """Keys the last query sees without a window: the sequence, or a decode step's cache plus its own token."""
    return seq_len + 1 if phase == "decode" else seq_len


def covered_windows(config: RunConfig) -> list[str]:
    """One line per scenario whose window covers some of its sequences whole: those points ran as causal.

    The file's own windows never cover every seq_len (the config refuses that); a model preset's window
    (4096) usually covers a short sweep entirely. Either way the point is plain causal attention (within
    each document, with lengths), run and labelled as such, and the user is told why the window is gone.
    """
    notes = []
    for spec in config.scenarios:
        if "sliding_window" not in (spec.mask or []):
            continue
        covering = []
        for window in spec.window or []:
            covered = sorted(
                {n for n, phase in itertools.product(spec.seq_len, spec.phase) if window >= keys_seen(n, phase)}
            )
            if covered:
                covering.append(f"{window} covers the whole sequence at {', '.join(f'n={n}' for n in covered)}")
        if covering:
            owner = f"{spec.model}'s window" if spec.model else "window"
            plain = "causal attention within each document" if spec.lengths else "causal attention"
            notes.append(f"scenario {spec.name!r}: {owner} {'; '.join(covering)}: run as plain {plain}")
    return notes


def count_cases(config: RunConfig, device: torch.device) -> int:
    """At most how many cases :func:`expand_cases` returns (a size swept beside masks it does not apply to
    counts once per value here), without building them: a sweep may be huge."""
    return len(_dtypes(config, device)) * sum(math.prod(map(len, _axes(spec))) for spec in config.scenarios)


def expand_cases(config: RunConfig, device: torch.device) -> list[Case]:
    """Every case of every scenario, in file order, each sweep in cartesian-product order (dtype outermost)."""
    cases: list[Case] = []
    for spec in config.scenarios:
        points: dict[str, Case] = {}  # a window swept beside other masks would repeat those: once each
        for dtype, values in itertools.product(_dtypes(config, device), itertools.product(*_axes(spec))):
            fields = _pattern_fields(dict(zip(SWEEP_FIELDS, values, strict=True)))
            case = Case(scenario=spec.name, dtype=dtype, seed=spec.seed, model=spec.model, **fields)
            points.setdefault(case.case_id, case)
        cases.extend(points.values())
    return cases
