"""Every probe statistic against a case small enough to compute by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
import torch

from mhabench.probe import attention_stats as stats


def t(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_entry_variance() -> None:
    # entries 1, 3, 5, 7: mean 4, squared deviations 9, 1, 1, 9 → 20 / 4
    assert stats.entry_variance(t([[1, 3], [5, 7]])).item() == pytest.approx(5.0)


def test_off_diagonal_variance_ignores_the_diagonal() -> None:
    # off-diagonal 1…6: mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 0.25 + 2.25 + 6.25 = 17.5 → / 6
    scores = t([[100, 1, 2], [3, 100, 4], [5, 6, 100]])
    assert stats.off_diagonal_variance(scores).item() == pytest.approx(17.5 / 6)


def test_row_max_and_entropy() -> None:
    probs = t([[0.5, 0.5], [1.0, 0.0]])
    assert stats.row_max(probs).item() == pytest.approx(0.75)  # (0.5 + 1) / 2
    assert stats.row_entropy(probs).item() == pytest.approx(math.log(2) / 2)  # (ln 2 + 0) / 2, 0·log 0 = 0


def test_softmax_jacobian_norm_matches_the_explicit_jacobian() -> None:
    # p = (½, ½): J = [[¼, −¼], [−¼, ¼]], ‖J‖_F = √(4/16) = ½; a one-hot row has J = 0
    assert stats.softmax_jacobian_norm(t([[0.5, 0.5], [1.0, 0.0]])).tolist() == pytest.approx([0.5, 0.0])
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    explicit = torch.linalg.matrix_norm(torch.diag(p) - torch.outer(p, p))
    assert stats.softmax_jacobian_norm(p).item() == pytest.approx(explicit.item())


def test_dead_gradient_share() -> None:
    # rows (1 − δ, δ) have ‖J‖_F = 2δ(1 − δ): δ = 1e-3 → 0.002 (dead), δ = ½ → ½ (alive), one-hot → 0 (dead)
    probs = t([[1.0, 0.0], [0.5, 0.5], [0.999, 0.001]])
    assert stats.dead_gradient_share(probs).item() == pytest.approx(2 / 3)


def test_score_rank() -> None:
    assert stats.score_rank(t([[1, 2], [2, 4]])).item() == 1  # second row = 2 × first
    assert stats.score_rank(torch.eye(3, dtype=torch.float64)).item() == 3


def test_effective_rank() -> None:
    # singular values (1, 1, 0) → shares (½, ½, 0) → entropy ln 2 → effective rank 2
    assert stats.effective_rank(torch.diag(t([[1, 1, 0]])[0])).item() == pytest.approx(2.0)
    assert stats.effective_rank(torch.eye(4, dtype=torch.float64)).item() == pytest.approx(4.0)


def test_diagonal_argmax_share() -> None:
    # row 0 peaks at column 0 (its diagonal), row 1 at column 0 (not its diagonal)
    assert stats.diagonal_argmax_share(t([[3, 1], [5, 2]])).item() == pytest.approx(0.5)


def test_diagonal_z_score() -> None:
    # row 0: (4 − mean(1, 3)) / std(1, 3) = 2 / 1; row 1: (2 − 2) / 2 = 0; row 2: (5 − 1) / 1 = 4 → mean 2
    scores = t([[4, 1, 3], [0, 2, 4], [2, 0, 5]])
    assert stats.diagonal_z_score(scores).item() == pytest.approx(2.0)


def test_asymmetry() -> None:
    # S − Sᵀ = [[0, 1], [−1, 0]]: norm √2 over ‖S‖ = 1
    assert stats.asymmetry(t([[0, 1], [0, 0]])).item() == pytest.approx(math.sqrt(2))
    assert stats.asymmetry(t([[1, 2], [2, 5]])).item() == 0.0


def test_cauchy_schwarz_violations() -> None:
    assert stats.cauchy_schwarz_violations(t([[4, 2], [2, 1]])).item() == 0.0  # PSD: 2 = √(4·1), on the bound
    assert stats.cauchy_schwarz_violations(t([[1, 2], [2, 1]])).item() == 1.0  # 2 > √(1·1) in both pairs
    # only (0, 2) and (2, 0) break the bound: 2 of 6 off-diagonal pairs
    scores = t([[1, 0.5, 3], [0.5, 1, 0], [3, 0, 1]])
    assert stats.cauchy_schwarz_violations(scores).item() == pytest.approx(2 / 6)


def test_top_k_mass_and_self_attention_ratio() -> None:
    assert stats.top_k_mass(t([[0.5, 0.3, 0.2]]), k=2).item() == pytest.approx(0.8)
    # diagonal (0.5, 0.75): mean 0.625 × L = 2
    assert stats.self_attention_ratio(t([[0.5, 0.5], [0.25, 0.75]])).item() == pytest.approx(1.25)


def test_jl_distortion_is_the_worst_pair() -> None:
    # squared distances before: 1, 4, 5; after (1-D points 0, 1, 1): 1, 1, 0 → |ratio − 1| = 0, 0.75, 1
    points, projected = t([[0, 0], [1, 0], [0, 2]]), t([[0], [1], [1]])
    assert stats.jl_distortion(points, projected).item() == pytest.approx(1.0)


def test_jl_distortion_skips_identical_points() -> None:
    # pair (0, 1) coincides before the map and is skipped; (0, 2): 1 → 4 (3), (1, 2): 1 → 9 (8)
    points, projected = t([[0, 0], [0, 0], [1, 0]]), t([[0], [5], [2]])
    assert stats.jl_distortion(points, projected).item() == pytest.approx(8.0)


def test_masked_head_change() -> None:
    # two heads of width 1 at one token, W_O = [[1], [1]]: terms 3 and 4, y = 7 (8 with b_O = 1)
    outputs = torch.tensor([[[3.0]], [[4.0]]], dtype=torch.float64)  # (h, n, d_k)
    w_o = t([[1], [1]])
    assert stats.masked_head_change(outputs, w_o, None).tolist() == pytest.approx([3 / 7, 4 / 7])
    assert stats.masked_head_change(outputs, w_o, t([[1]])[0]).tolist() == pytest.approx([3 / 8, 4 / 8])


def test_leading_dimensions_are_kept() -> None:
    """(batch, heads, n, L) in → (batch, heads) out: one call measures every head."""
    probs = torch.rand(2, 3, 5, 5, dtype=torch.float64).softmax(dim=-1)
    for fn in (stats.row_max, stats.row_entropy, stats.dead_gradient_share, stats.effective_rank, stats.asymmetry):
        assert fn(probs).shape == (2, 3)
