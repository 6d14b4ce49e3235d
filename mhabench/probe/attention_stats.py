"""Statistics of attention itself: scores S = Q Kᵀ and probabilities P = softmax(S · scale).

Pure functions on tensors. The last two dimensions are (queries, keys) — or (tokens, features) for
the projection statistics — and every leading dimension (batch, heads) is kept, so one call
measures every head of every sequence at once. Each returns a float64 tensor of the leading shape.
They exist to test claims (:mod:`mhabench.probe.claims`), so each is defined exactly as its claim
needs it; every docstring says which. Call them on float64 tensors: the dead-gradient norm and the
rank are differences of nearly equal numbers.
"""

from __future__ import annotations

import torch

DEAD_GRADIENT_NORM = 0.01
"""A softmax row whose Jacobian has Frobenius norm below this passes (almost) no gradient back."""


def _off_diagonal(size: int, device: torch.device) -> torch.Tensor:
    return ~torch.eye(size, dtype=torch.bool, device=device)


def entry_variance(t: torch.Tensor) -> torch.Tensor:
    """Variance of every entry of (…, n, d): σ_q² or σ_k², the premise of Var(q·k) = d_k·σ_q²·σ_k²."""
    return t.flatten(-2).double().var(dim=-1, correction=0)


def off_diagonal_variance(scores: torch.Tensor) -> torch.Tensor:
    """Variance of S_ij over i ≠ j: pairs of distinct tokens, whose q_i and k_j are independent.

    The diagonal is left out because with W_K = W_Q it is |q_i|², not a product of independent vectors.
    """
    values = scores.double()[..., _off_diagonal(scores.shape[-1], scores.device)]
    return values.var(dim=-1, correction=0)


def row_max(probs: torch.Tensor) -> torch.Tensor:
    """Mean over rows of the largest probability: 1/L for uniform rows, 1 for saturated ones."""
    return probs.double().amax(dim=-1).mean(dim=-1)


def row_entropy(probs: torch.Tensor) -> torch.Tensor:
    """Mean over rows of −Σ p log p in nats (0 · log 0 = 0): ln L when uniform, 0 when one-hot."""
    p = probs.double()
    return -torch.special.xlogy(p, p).sum(dim=-1).mean(dim=-1)


def softmax_jacobian_norm(probs: torch.Tensor) -> torch.Tensor:
    """‖diag p − p pᵀ‖_F of every row (…, n), in O(L) per row instead of building the L×L Jacobian.

    ‖J‖²_F = Σ_i (p_i − p_i²)² + Σ_{i≠j} p_i² p_j² = Σp² − 2Σp³ + (Σp²)².
    """
    p = probs.double()
    square, cube = p.square().sum(dim=-1), p.pow(3).sum(dim=-1)
    return (square - 2 * cube + square.square()).clamp_min(0).sqrt()


def dead_gradient_share(probs: torch.Tensor, threshold: float = DEAD_GRADIENT_NORM) -> torch.Tensor:
    """Share of rows whose softmax Jacobian norm is below ``threshold``: the vanishing-gradient claim."""
    return (softmax_jacobian_norm(probs) < threshold).double().mean(dim=-1)


def score_rank(scores: torch.Tensor) -> torch.Tensor:
    """``matrix_rank`` of S (torch's default tolerance): at most min(d_k, L), the low-rank bottleneck."""
    return torch.linalg.matrix_rank(scores.double()).double()


def effective_rank(matrix: torch.Tensor) -> torch.Tensor:
    """exp of the entropy of the normalised singular values (Roy & Vetterli 2007): a soft rank for P."""
    singular = torch.linalg.svdvals(matrix.double())
    share = singular / singular.sum(dim=-1, keepdim=True)
    return torch.exp(-torch.special.xlogy(share, share).sum(dim=-1))


def diagonal_argmax_share(scores: torch.Tensor) -> torch.Tensor:
    """Share of rows whose largest score is on the diagonal (a token's own key wins)."""
    rows = torch.arange(scores.shape[-1], device=scores.device)
    return (scores.argmax(dim=-1) == rows).double().mean(dim=-1)


def diagonal_z_score(scores: torch.Tensor) -> torch.Tensor:
    """Mean over rows of (S_ii − mean_{j≠i} S_ij) / std_{j≠i} S_ij: how far the diagonal stands out."""
    s = scores.double()
    size = s.shape[-1]
    others = s[..., _off_diagonal(size, s.device)].unflatten(-1, (size, size - 1))
    diagonal = s.diagonal(dim1=-2, dim2=-1)
    z = (diagonal - others.mean(dim=-1)) / others.std(dim=-1, correction=0)
    return z.mean(dim=-1)


def asymmetry(scores: torch.Tensor) -> torch.Tensor:
    """‖S − Sᵀ‖_F / ‖S‖_F: 0 for a symmetric S (shared W_Q = W_K), about √2 for independent Q and K."""
    s = scores.double()
    return torch.linalg.matrix_norm(s - s.transpose(-2, -1)) / torch.linalg.matrix_norm(s)


def cauchy_schwarz_violations(scores: torch.Tensor) -> torch.Tensor:
    """Share of pairs i ≠ j with S_ij > √(S_ii·S_jj), beyond rounding (1e-9 of max |S|).

    A positive semi-definite S (S = Q Qᵀ) has none; that bound, not "the diagonal always wins", is
    what sharing W_Q = W_K guarantees.
    """
    s = scores.double()
    diagonal = s.diagonal(dim1=-2, dim2=-1).clamp_min(0)
    bound = (diagonal.unsqueeze(-1) * diagonal.unsqueeze(-2)).sqrt()
    slack = 1e-9 * s.abs().amax(dim=(-2, -1), keepdim=True)
    violated = (s > bound + slack) & _off_diagonal(s.shape[-1], s.device)
    return violated.flatten(-2).double().sum(dim=-1) / (s.shape[-1] * (s.shape[-1] - 1))


def top_k_mass(probs: torch.Tensor, k: int) -> torch.Tensor:
    """Mean over rows of the probability held by the ``k`` largest entries: near 1 means sparse attention."""
    return probs.double().topk(k, dim=-1).values.sum(dim=-1).mean(dim=-1)


def self_attention_ratio(probs: torch.Tensor) -> torch.Tensor:
    """Mean P_ii × L: how much more than uniform (1) a token attends to itself."""
    return probs.double().diagonal(dim1=-2, dim2=-1).mean(dim=-1) * probs.shape[-1]


def jl_distortion(points: torch.Tensor, projected: torch.Tensor) -> torch.Tensor:
    """Worst |‖f(u) − f(v)‖² / ‖u − v‖² − 1| over pairs of distinct points: the ε a projection achieves.

    ``points`` (…, n, D) and ``projected`` (…, n, k) are the same n points before and after the
    map f, already scaled so that a typical pair keeps its length; pairs of identical points are skipped.
    """
    before = torch.cdist(points.double(), points.double()).square()
    after = torch.cdist(projected.double(), projected.double()).square()
    pairs = torch.ones_like(before, dtype=torch.bool).triu(1) & (before > 0)
    distortion = torch.where(pairs, (after / before.where(pairs, 1.0) - 1).abs(), 0.0)
    return distortion.amax(dim=(-2, -1))


def masked_head_change(head_outputs: torch.Tensor, w_o: torch.Tensor, b_o: torch.Tensor | None) -> torch.Tensor:
    """‖y − y₋ₕ‖_F / ‖y‖_F for every head h: how much the layer output moves when head h is masked.

    ``head_outputs`` is (…, h, n, d_k), ``w_o`` (h·d_k, D) applied as ``merged @ w_o``; y₋ₕ zeroes
    head h's output before W_O, so y − y₋ₕ is head h's own term o_h · W_O[h]. Returns (…, h).
    """
    o = head_outputs.double()
    heads = o.shape[-3]
    w = w_o.double().unflatten(0, (heads, -1))  # (h, d_k, D)
    terms = torch.einsum("...hnd,hde->...hne", o, w)
    output = terms.sum(dim=-3) if b_o is None else terms.sum(dim=-3) + b_o.double()
    return torch.linalg.matrix_norm(terms) / torch.linalg.matrix_norm(output).unsqueeze(-1)
