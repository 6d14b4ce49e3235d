"""Issue 11 item 4: every full-width head has its own weights, so the ablation is h different heads."""

from __future__ import annotations

import itertools

import pytest
import torch

from mhabench import AttentionWeights, build
from mhabench.impls.full_dim_heads import full_dim_weights

D_MODEL, HEADS = 32, 4


def _head_scores(weights: AttentionWeights, x: torch.Tensor, heads: int) -> torch.Tensor:
    """(h, n, n) pre-softmax scores of every full-width head."""
    w = full_dim_weights(weights, heads).w_qkv
    q, k, _ = (t.unflatten(-1, (heads, D_MODEL)).transpose(0, 1) for t in (x @ w).chunk(3, dim=-1))
    return q @ k.transpose(-2, -1)


def test_every_head_computes_different_scores() -> None:
    """Rotating Q and K by the same amount would leave every dot product, so every head, unchanged."""
    weights = AttentionWeights.random(D_MODEL, seed=1, dtype=torch.float64)
    x = torch.randn(10, D_MODEL, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    scores = _head_scores(weights, x, HEADS)
    for i, j in itertools.combinations(range(HEADS), 2):
        assert (scores[i] - scores[j]).abs().max() > 0.1 * scores[i].abs().max(), (i, j)
    assert torch.allclose(scores[0], (x @ weights.w_q) @ (x @ weights.w_k).T)  # head 0 is the shared set itself


def test_the_output_keeps_the_reduced_layers_scale() -> None:
    """h identical heads summed with 1/√h would be √h × one head (2.000 at h = 4); h different heads are not."""
    weights = AttentionWeights.random(D_MODEL, seed=3, dtype=torch.float64)
    x = torch.randn(4, 16, D_MODEL, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    with torch.no_grad():
        one, four = build("full_dim_heads", weights, 1)(x), build("full_dim_heads", weights, HEADS)(x)
    assert (four.norm() / one.norm()).item() == pytest.approx(1.0, abs=0.3)


def test_the_cost_shapes_are_unchanged() -> None:
    packed = full_dim_weights(AttentionWeights.random(D_MODEL, bias=True), HEADS)
    assert packed.w_qkv.shape == (D_MODEL, 3 * HEADS * D_MODEL) and packed.w_o.shape == (HEADS * D_MODEL, D_MODEL)
    assert packed.b_qkv is not None and packed.b_qkv.shape == (3 * HEADS * D_MODEL,)
