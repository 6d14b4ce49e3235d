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

from mhabench.cost import Workload
from mhabench.pattern import PLAIN, AttentionPattern
from mhabench.scenario import lengths as doc_lengths
from mhabench.scenario.config import DTYPES, SWEEP_FIELDS, RunConfig, ScenarioSpec
from mhabench.scenario.device import resolve_dtype


@dataclasses.dataclass(frozen=True)
class Case:
    """One fully resolved point of a sweep: everything needed to build and run the layers.

    Every field is resolved where cases are built (:func:`expand_cases`): ``kv_heads`` and ``head_dim`` are the
    numbers the layers get, and ``pattern`` is the one statement of what each query sees, so nothing downstream
    re-derives a default or a mask from another field.
    """

    scenario: str
    batch: int
    seq_len: int
    d_model: int
    heads: int
    kv_heads: int
    """Key/value heads (``heads`` for plain multi-head attention)."""
    head_dim: int
    """Width of one head (d_model / heads unless the scenario sets it apart)."""
    bias: bool
    dtype: str
    seed: int
    pattern: AttentionPattern = PLAIN
    """What each query sees and how its scores are modified (:mod:`mhabench.pattern`)."""
    mode: str = "forward"
    phase: str = "prefill"
    model: str | None = None
    """The model preset or config.json the scenario's shape came from (None when none)."""
    tensor_parallel: int = 1
    """Ranks the heads are split across; 1 = one device."""
    lengths: str = "none"
    """Label of the documents' lengths in the case_id and the rows (``none``: every row is a full-length
    sequence); the lengths themselves are ``pattern.lengths``."""

    @property
    def causal(self) -> bool:
        """No query sees a later key of its segment (the pattern's, read-only)."""
        return self.pattern.causal

    @property
    def own_head_dim(self) -> bool:
        """The heads are not d_model / heads wide (Gemma 2, Qwen3): W_q's width is heads·head_dim, not d_model."""
        return self.heads * self.head_dim != self.d_model

    def workload(self) -> Workload:
        """The attention shape this case runs: decode is 1 query against seq_len + 1 keys (a window: the last
        ``window`` of them); documents run as their layout's rows (:meth:`AttentionPattern.input_shape`)."""
        decode = self.phase == "decode"
        rows, tokens = self.pattern.input_shape(self.batch, self.seq_len)
        return Workload(
            batch=rows,
            seq_len=1 if decode else tokens,
            kv_len=self.pattern.last_query_keys(self.seq_len + 1) if decode else tokens,
            d_model=self.d_model,
            heads=self.heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            element_bytes=DTYPES[self.dtype].itemsize,
            pattern=self.pattern,
            train=self.mode == "train",
            decode=decode,
        )

    @property
    def case_id(self) -> str:
        kv = f"-hd{self.head_dim}" if self.own_head_dim else ""  # absent otherwise: old case_ids stay
        kv += f"-kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        kv += f"-tp{self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        flags = "".join(f"-{flag}" for flag, on in (("causal", self.causal), ("bias", self.bias)) if on)
        flags += "".join(f"-{value}" for value in (self.mode, self.phase) if value not in ("forward", "prefill"))
        flags += self._pattern_flags()
        return f"{self.scenario}/b{self.batch}-n{self.seq_len}-d{self.d_model}-h{self.heads}{kv}-{self.dtype}{flags}"

    def _pattern_flags(self) -> str:
        """Case-id tokens of a mask other than none/causal, of documents and of a score modifier."""
        pattern = self.pattern
        flags = {
            "sliding_window": f"-window{pattern.window}",
            "prefix_lm": f"-prefix{pattern.prefix}",
            "document": "-document",
        }.get(pattern.mask, "")
        if pattern.lengths is not None:
            flags += f"-len{self.lengths}-{pattern.layout}"
        if pattern.score_mod == "softcap":
            flags += f"-softcap{pattern.softcap:g}"
        elif pattern.score_mod == "alibi":
            flags += "-alibi"
        return flags


def _dtypes(config: RunConfig, device: torch.device) -> list[str]:
    return list(dict.fromkeys(resolve_dtype(d, device) for d in config.dtype))


def _axes(spec: ScenarioSpec) -> list[list[Any]]:
    # kv_heads None → one "same as heads"; mask None → causal decides; no window, lengths … → one None
    return [getattr(spec, field) or [None] for field in SWEEP_FIELDS]


def _case_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """The case fields of one sweep point, resolved: ``kv_heads`` and ``head_dim`` their defaults where unset, and
    the mask, its size, the documents and the score modifier as one pattern. A size applies to its own mask only,
    and lengths resolve against this point's seq_len."""
    spec, causal = fields.pop("lengths"), fields.pop("causal")
    window, prefix, layout, softcap = (fields.pop(name) for name in ("window", "prefix", "layout", "softcap"))
    score_mod = fields.pop("score_mod")
    mask = fields.pop("mask") or ("causal" if causal else "none")
    if mask == "sliding_window" and window >= keys_seen(fields["seq_len"], fields["phase"]):
        # the window covers every query's whole past: plain causal, per document with lengths (covered_windows)
        mask = "document" if spec is not None else "causal"
    documents = None if spec is None else doc_lengths.resolve(spec, fields["seq_len"])
    if documents is not None:
        fields["batch"] = len(documents)
    if fields["kv_heads"] is None:
        fields["kv_heads"] = fields["heads"]
    if fields["head_dim"] is None:
        fields["head_dim"] = fields["d_model"] // fields["heads"]
    pattern = AttentionPattern(
        mask=mask,
        window=window if mask == "sliding_window" else None,
        prefix=prefix if mask == "prefix_lm" else None,
        lengths=documents,
        layout="packed" if documents is not None and layout == "packed" else "padded",
        score_mod=score_mod,
        softcap=softcap if score_mod == "softcap" else None,
    )
    label = "none" if spec is None else doc_lengths.label(spec)
    return fields | {"pattern": pattern, "lengths": label}


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
            fields = _case_fields(dict(zip(SWEEP_FIELDS, values, strict=True)))
            case = Case(scenario=spec.name, dtype=dtype, seed=spec.seed, model=spec.model, **fields)
            points.setdefault(case.case_id, case)
        cases.extend(points.values())
    return cases
