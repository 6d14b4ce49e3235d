"""The theory side of the claims: the values a statistic should take, and when the theory applies.

Johnson–Lindenstrauss, in the form and with the constant of Dasgupta & Gupta, "An elementary proof
of a theorem of Johnson and Lindenstrauss", Random Structures & Algorithms 22(1), 2003:
for 0 < ε < 1 and n points, k ≥ 4·ln n / (ε²/2 − ε³/3) dimensions suffice for a linear map that
keeps every squared pairwise distance within a factor 1 ± ε. The denominator is at most 1/6 (at
ε → 1), so below k = 24·ln n no ε < 1 is guaranteed at all.

Softmax entropy: for L logits drawn i.i.d. N(0, v), H = ln Z − Σ_j z_j e^{z_j} / Z with
Z = Σ_j e^{z_j}; as L → ∞, Z → L·e^{v/2} and H → ln L + v/2 − E[z e^z]/E[e^z] = ln L − v/2. The
second-order (delta-method) term of the expansion in 1/L is +(v·e^v − (e^v − 1)/2)/L nats: 0.015
at v = 1, L = 128 (a simulation gives 0.012), but e^16-sized for unscaled scores with d_k = 16. The
limit is the theory; it applies while that correction stays below half the claim's tolerance.
"""

from __future__ import annotations

import math

JL_CONSTANT = 4.0
"""k ≥ JL_CONSTANT·ln n / (ε²/2 − ε³/3) (Dasgupta & Gupta 2003)."""
ENTROPY_CORRECTION_LIMIT = 0.025
"""nats: ln L − v/2 is trusted while its 1/L correction is below this (half the claim's 0.05 tolerance)."""


def _jl_denominator(eps: float) -> float:
    return eps**2 / 2 - eps**3 / 3


def jl_min_dim(eps: float, points: int) -> float:
    """Dimensions that guarantee distortion ``eps`` for ``points`` points (0 < eps < 1)."""
    if not 0 < eps < 1:
        raise ValueError(f"the lemma needs 0 < ε < 1, not {eps}")
    return JL_CONSTANT * math.log(points) / _jl_denominator(eps)


def jl_no_guarantee_below(points: int) -> float:
    """The smallest k for which some ε < 1 is guaranteed: 24·ln n."""
    return JL_CONSTANT * math.log(points) * 6


def jl_epsilon(dim: int, points: int) -> float | None:
    """The smallest ε the lemma guarantees for ``points`` points in ``dim`` dimensions; None if no ε < 1.

    ε²/2 − ε³/3 increases on (0, 1), so the ε where it meets 4·ln n / k is found by bisection.
    """
    if points < 2:
        return 0.0
    need = JL_CONSTANT * math.log(points) / dim
    if need >= _jl_denominator(1.0):
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if _jl_denominator(middle) < need else (low, middle)
    return high


def softmax_entropy(seq_len: int, logit_variance: float) -> float:
    """Expected row entropy (nats) of softmax over ``seq_len`` i.i.d. N(0, v) logits: ln L − v/2."""
    return math.log(seq_len) - logit_variance / 2


def entropy_correction(seq_len: int, logit_variance: float) -> float:
    """The second-order finite-L term (v·e^v − (e^v − 1)/2)/L of the entropy (see the module docstring)."""
    v = min(logit_variance, 700.0)  # e^700 is near float64's limit; the correction is astronomic long before
    return (v * math.exp(v) - math.expm1(v) / 2) / seq_len


def entropy_formula_applies(seq_len: int, logit_variance: float) -> bool:
    """Whether L is large enough against e^v for :func:`softmax_entropy`."""
    return entropy_correction(seq_len, logit_variance) < ENTROPY_CORRECTION_LIMIT
