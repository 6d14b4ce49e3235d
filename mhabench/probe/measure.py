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

import numpy as np
import torch

from mhabench.impls import build
from mhabench.impls.base import repeat_kv
from mhabench.modes import parameter_count
from mhabench.probe import stats
from mhabench.probe.config import ProbeCase
from mhabench.probe.inputs import ProbeSource
from mhabench.reference import numerical_error
from mhabench.weights import AttentionWeights

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


def _probability_stats(probs: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        "row_max": stats.row_max(probs),
        "entropy": stats.row_entropy(probs),
        "dead_gradient_share": stats.dead_gradient_share(probs),
    }


def _diagonal_stats(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        "diag_argmax_share": stats.diagonal_argmax_share(scores),
        "diag_z": stats.diagonal_z_score(scores),
        "asymmetry": stats.asymmetry(scores),
    }


def _jl(x: torch.Tensor, w_q: torch.Tensor, heads: int) -> torch.Tensor:
    """Each head's query map f(u) = u·W_Q^h, scaled by √(D / ‖W_Q^h‖²_F) so a random direction keeps its length.

    For entries N(0, 1/D) that is ≈ √(D/d_k): the Gaussian map with N(0, 1/d_k) entries of the lemma.
    """
    blocks = w_q.unflatten(1, (heads, -1)).transpose(0, 1)  # (h, D, d_k)
    scale = (w_q.shape[0] / blocks.square().sum(dim=(1, 2))).sqrt()
    projected = _project(x, w_q, None, heads) * scale[:, None, None]
    return stats.jl_distortion(x.unsqueeze(1).expand(-1, heads, -1, -1), projected)


def head_statistics(x: torch.Tensor, w: AttentionWeights, heads: int) -> dict[Key, torch.Tensor]:
    """Every per-head statistic of one draw ``x`` (b, n, D), each averaged over the batch: (heads,)."""
    kv_heads = w.kv_dim // (w.d_model // heads)
    q = _project(x, w.w_q, w.b_q, heads)
    k, v = (repeat_kv(_project(x, m, b, kv_heads), heads // kv_heads) for m, b in ((w.w_k, w.b_k), (w.w_v, w.b_v)))
    scores, shared = q @ k.transpose(-2, -1), q @ q.transpose(-2, -1)
    scaled = scores / math.sqrt(q.shape[-1])
    probs = scaled.softmax(dim=-1)
    values: dict[Key, torch.Tensor] = {
        ("standard", "var_q"): stats.entry_variance(q),
        ("standard", "var_k"): stats.entry_variance(k),
        ("standard", "var_scores"): stats.off_diagonal_variance(scores),
        ("standard", "var_scores_scaled"): stats.off_diagonal_variance(scaled),
        ("standard", "rank_scores"): stats.score_rank(scores),
        ("standard", "effective_rank_probs"): stats.effective_rank(probs),
        ("standard", "jl_distortion"): _jl(x, w.w_q, heads),
        ("standard", "top_k_mass"): stats.top_k_mass(probs, max(1, x.shape[1] // TOP_K_SHARE)),
        ("standard", "self_attention_ratio"): stats.self_attention_ratio(probs),
        ("standard", "masked_head_change"): stats.masked_head_change(probs @ v, w.w_o, w.b_o),
        ("shared_qk", "cauchy_schwarz_violations"): stats.cauchy_schwarz_violations(shared),
    }
    values |= {("standard", name): t for name, t in (_probability_stats(probs) | _diagonal_stats(scores)).items()}
    values |= {("unscaled", name): t for name, t in _probability_stats(scores.softmax(dim=-1)).items()}
    values |= {("shared_qk", name): t for name, t in _diagonal_stats(shared).items()}
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


def measure_case(case: ProbeCase, source: ProbeSource) -> CaseMeasurement:
    """``case.samples`` draws, each measured on every layer of ``source``."""
    generator = torch.Generator().manual_seed(case.seed + 1)
    layouts = [Layouts.of(w, case.heads) for w in source.weights]
    head_draws: list[list[dict[Key, torch.Tensor]]] = []  # [draw][layer]
    layer_draws: list[list[dict[Key, float]]] = []
    for _ in range(case.samples):
        inputs = source.draw(generator)
        head_draws.append([head_statistics(x, w, case.heads) for x, w in zip(inputs, source.weights, strict=True)])
        layer_draws.append([layer_statistics(x, lay) for x, lay in zip(inputs, layouts, strict=True)])
    head_values = {
        key: np.stack([np.stack([draw[i][key].numpy() for draw in head_draws], -1) for i in range(len(layouts))])
        for key in head_draws[0][0]
    }
    layer_values = {
        key: np.array([[draw[i][key] for draw in layer_draws] for i in range(len(layouts))]) for key in layer_draws[0][0]
    }
    return CaseMeasurement(case, source.layers, head_values, layer_values)
