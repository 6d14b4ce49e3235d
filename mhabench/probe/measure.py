"""Every statistic of one case: per layer, per head, per input draw, in float64 on the CPU.

Three variants of each head are measured from the same projections: ``standard`` (separate W_Q,
W_K, P = softmax(S/√d_k)), ``unscaled`` (the same S, P = softmax(S)) and ``shared_qk`` (W_K := W_Q,
S = Q Qᵀ). The ``layer`` variant holds what belongs to a whole layer: the packed (``fused``) and
per-head (``per_head``) implementations built from the same weights, their output difference and
parameter counts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from mhabench.impls import build
from mhabench.impls.base import repeat_kv
from mhabench.impls.reference import numerical_error
from mhabench.impls.weights import AttentionWeights
from mhabench.probe import attention_stats as stats
from mhabench.probe.config import ProbeCase
from mhabench.probe.inputs import ProbeSource
from mhabench.run.steps import parameter_count

TOP_K_SHARE = 8
"""Sparsity is the probability mass on the top L / 8 keys of a row."""

Key = tuple[str, str]
"""(variant, statistic)."""


@dataclasses.dataclass(frozen=True)
class CaseMeasurement:
    """``head_values[key]`` is (layers, heads, samples); ``layer_values[key]`` is (layers, samples)."""

    case: ProbeCase
    layers: list[int]
    head_values: dict[Key, np.ndarray]
    layer_values: dict[Key, np.ndarray]

    def values(self, variant: str, statistic: str) -> np.ndarray:
        key = (variant, statistic)
        return self.head_values[key] if key in self.head_values else self.layer_values[key]


def _heads(t: torch.Tensor, heads: int) -> torch.Tensor:
    """(b, n, heads·d) → (b, heads, n, d)."""
    return t.unflatten(-1, (heads, -1)).transpose(1, 2)


def _project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, heads: int) -> torch.Tensor:
    return _heads(x @ w if b is None else x @ w + b, heads)


@dataclasses.dataclass(frozen=True)
class LayerDraw:
    """One draw ``x`` (b, n, D) through one layer's projections, split into heads: (b, h, n, ·)."""

    x: torch.Tensor
    weights: AttentionWeights
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    """S = Q Kᵀ, unscaled."""

    @classmethod
    def of(cls, x: torch.Tensor, w: AttentionWeights, heads: int) -> LayerDraw:
        kv_heads = w.kv_dim // (w.q_dim // heads)
        q = _project(x, w.w_q, w.b_q, heads)
        k, v = (repeat_kv(_project(x, m, b, kv_heads), heads // kv_heads) for m, b in ((w.w_k, w.b_k), (w.w_v, w.b_v)))
        return cls(x, w, q, k, v, q @ k.transpose(-2, -1))

    @property
    def scaled(self) -> torch.Tensor:
        return self.scores / math.sqrt(self.q.shape[-1])

    @property
    def probs(self) -> torch.Tensor:
        """P = softmax(S / √d_k)."""
        return self.scaled.softmax(dim=-1)


def _variance(h: LayerDraw) -> dict[Key, torch.Tensor]:
    return {
        ("standard", "var_q"): stats.entry_variance(h.q),
        ("standard", "var_k"): stats.entry_variance(h.k),
        ("standard", "var_scores"): stats.off_diagonal_variance(h.scores),
        ("standard", "var_scores_scaled"): stats.off_diagonal_variance(h.scaled),
    }


def _saturation(h: LayerDraw) -> dict[Key, torch.Tensor]:
    """Scaled and unscaled softmax of the same scores, plus the logit variances the entropy theory needs."""
    values = _variance(h)
    for variant, probs in (("standard", h.probs), ("unscaled", h.scores.softmax(dim=-1))):
        values[(variant, "row_max")] = stats.row_max(probs)
        values[(variant, "entropy")] = stats.row_entropy(probs)
        values[(variant, "dead_gradient_share")] = stats.dead_gradient_share(probs)
    return values


def _rank(h: LayerDraw) -> dict[Key, torch.Tensor]:
    return {
        ("standard", "rank_scores"): stats.score_rank(h.scores),
        ("standard", "effective_rank_probs"): stats.effective_rank(h.probs),
    }


def _diagonal(h: LayerDraw) -> dict[Key, torch.Tensor]:
    """Separate W_Q, W_K (``standard``) against W_K := W_Q (``shared_qk``, S = Q Qᵀ)."""
    shared = h.q @ h.q.transpose(-2, -1)
    values = {("shared_qk", "cauchy_schwarz_violations"): stats.cauchy_schwarz_violations(shared)}
    for variant, scores in (("standard", h.scores), ("shared_qk", shared)):
        values[(variant, "diag_argmax_share")] = stats.diagonal_argmax_share(scores)
        values[(variant, "diag_z")] = stats.diagonal_z_score(scores)
        values[(variant, "asymmetry")] = stats.asymmetry(scores)
    return values


def _jl(h: LayerDraw) -> dict[Key, torch.Tensor]:
    """Each head's query map f(u) = u·W_Q^h, scaled by √(D / ‖W_Q^h‖²_F) so a random direction keeps its length.

    For entries N(0, 1/D) that is ≈ √(D/d_k): the Gaussian map with N(0, 1/d_k) entries of the lemma.
    """
    w_q, heads = h.weights.w_q, h.q.shape[1]
    blocks = w_q.unflatten(1, (heads, -1)).transpose(0, 1)  # (h, D, d_k)
    scale = (w_q.shape[0] / blocks.square().sum(dim=(1, 2))).sqrt()
    projected = _project(h.x, w_q, None, heads) * scale[:, None, None]
    points = h.x.unsqueeze(1).expand(-1, heads, -1, -1)
    return {("standard", "jl_distortion"): stats.jl_distortion(points, projected)}


def _trained(h: LayerDraw) -> dict[Key, torch.Tensor]:
    probs = h.probs
    return {
        ("standard", "top_k_mass"): stats.top_k_mass(probs, max(1, probs.shape[-1] // TOP_K_SHARE)),
        ("standard", "self_attention_ratio"): stats.self_attention_ratio(probs),
        ("standard", "masked_head_change"): stats.masked_head_change(probs @ h.v, h.weights.w_o, h.weights.b_o),
    }


HEAD_GROUPS: dict[str, Callable[[LayerDraw], dict[Key, torch.Tensor]]] = {
    "var_qk": _variance,
    "saturation": _saturation,
    "rank": _rank,
    "diagonal": _diagonal,
    "jl": _jl,
    "trained": _trained,
}
"""Claim group → the per-head statistics its claims read (``equivalence`` is per layer)."""


def head_statistics(x: torch.Tensor, w: AttentionWeights, heads: int, groups: Sequence[str]) -> dict[Key, torch.Tensor]:
    """The per-head statistics ``groups`` need on one draw ``x`` (b, n, D), each averaged over the batch: (heads,)."""
    head = LayerDraw.of(x, w, heads)
    values: dict[Key, torch.Tensor] = {}
    for group in groups:
        if group in HEAD_GROUPS:
            values |= HEAD_GROUPS[group](head)
    return {key: t.mean(dim=0) for key, t in values.items()}


@dataclasses.dataclass(frozen=True)
class Layouts:
    """The packed and per-head layers of one weight set (float64), for the equivalence claim."""

    fused: torch.nn.Module
    per_head: torch.nn.Module
    weight_params: int

    @classmethod
    def of(cls, weights: AttentionWeights, heads: int) -> Layouts:
        return cls(build("fused", weights, heads), build("per_head", weights, heads), weights.parameter_count())


def layer_statistics(x: torch.Tensor, layouts: Layouts) -> dict[Key, float]:
    """Packed vs per-head on one draw: the same function and the same weights, in different layouts."""
    with torch.no_grad():
        _, rel = numerical_error(layouts.fused(x), layouts.per_head(x).double())
    return {
        ("layer", "max_rel_err"): rel,
        ("layer", "params_fused"): float(parameter_count(layouts.fused)),
        ("layer", "params_per_head"): float(parameter_count(layouts.per_head)),
        ("layer", "params_weights"): float(layouts.weight_params),
    }


def _stacked(draws: list[list[dict[Key, Any]]]) -> dict[Key, np.ndarray]:
    """[draw][layer]{key: value of shape S} → {key: array (layers, *S, draws)}."""
    if not draws or not draws[0] or not draws[0][0]:
        return {}
    layers = range(len(draws[0]))
    return {
        key: np.stack([np.stack([np.asarray(d[i][key]) for d in draws], -1) for i in layers]) for key in draws[0][0]
    }


def measure_case(case: ProbeCase, source: ProbeSource) -> CaseMeasurement:
    """``case.samples`` draws, each measured on every layer of ``source`` for the case's claim groups."""
    generator = torch.Generator().manual_seed(case.seed + 1)
    layouts = [Layouts.of(w, case.heads) for w in source.weights] if "equivalence" in case.claims else []
    head_draws: list[list[dict[Key, torch.Tensor]]] = []  # [draw][layer]
    layer_draws: list[list[dict[Key, float]]] = []
    for _ in range(case.samples):
        inputs = source.draw(generator)
        pairs = zip(inputs, source.weights, strict=True)
        head_draws.append([head_statistics(x, w, case.heads, case.claims) for x, w in pairs])
        if layouts:
            layer_draws.append([layer_statistics(x, layout) for x, layout in zip(inputs, layouts, strict=True)])
    return CaseMeasurement(case, source.layers, _stacked(head_draws), _stacked(layer_draws))
