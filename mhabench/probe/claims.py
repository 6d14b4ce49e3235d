"""The seeds' claims: for each, the theory value, the tolerance, the premise and the verdict rule.

Verdicts: PASS / FAIL (the measurement agrees with the theory within the tolerance, or not),
NO-GUARANTEE (the theory's premise does not hold for this case, so it predicts nothing), INFO (a
statistic without a theoretical value) and UNTESTABLE (needs training; listed so it is not hidden).
Sources name the seed document and section (``/work/shared/seeds``) and the paper behind a formula.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable

import numpy as np

from mhabench.probe import theory
from mhabench.probe.config import ProbeCase
from mhabench.probe.measure import TOP_K_SHARE, CaseMeasurement

PASS, FAIL, NO_GUARANTEE, INFO, UNTESTABLE = "PASS", "FAIL", "NO-GUARANTEE", "INFO", "UNTESTABLE"
VARIANCE_TOLERANCE = 0.10
"""Relative: Var(q·k) may differ from d_k·σ_q²·σ_k² by 10 % (estimation noise over L² correlated pairs)."""
ENTROPY_TOLERANCE_NATS = 2 * theory.ENTROPY_CORRECTION_LIMIT
"""Absolute: where ln L − v/2 applies its finite-L correction is below half of this; the rest is sampling noise."""
TREND_TOLERANCE = 0.02
"""Absolute, on a share or a probability: "flat" moves less than this; "rises" never falls by more and gains more."""
EQUIVALENCE_TOLERANCE = 1e-10
"""Relative output difference of two float64 layouts: summation order only."""

SCALE = "seed 004 §4; Vaswani et al. 2017 §3.2.1"
SHARED = "seed 004 §2"
RANK = "seed 002 view 4; Bhojanapalli et al. 2020"
JL = "seed 002 view 3; Dasgupta & Gupta 2003"
LAYOUT = "seed 001"
SPARSE, PRUNE = "seed 003 §2.2", "seed 003 §2.6"


@dataclasses.dataclass(frozen=True)
class ClaimRow:
    """One line of claims.csv."""

    claim: str
    statement: str
    source: str
    case: str
    theory: float | str | None
    measured: float | str | None
    sd: float | None
    tolerance: str
    verdict: str
    note: str = ""


CLAIM_COLUMNS = [field.name for field in dataclasses.fields(ClaimRow)]


def _mean_sd(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation over every layer, head and draw."""
    return float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0


def _premise_note(case: ProbeCase, needs: str, zero_mean: bool = False) -> str | None:
    """Why the random-matrix premise ``needs`` fails for this case, or None when it holds."""
    if case.trained:
        return f"trained weights: {needs} does not hold"
    if zero_mean and case.bias:
        return "bias gives q and k nonzero means"
    return None


def _checked(row: ClaimRow, passed: bool, premise_failure: str | None) -> ClaimRow:
    if premise_failure is not None:
        return dataclasses.replace(row, verdict=NO_GUARANTEE, note=f"{premise_failure}; {row.note}".rstrip("; "))
    return dataclasses.replace(row, verdict=PASS if passed else FAIL)


def var_qk(m: CaseMeasurement) -> list[ClaimRow]:
    """The 1/√d_k argument: Var(q·k) = d_k·σ_q²·σ_k², and 1·σ_q²·σ_k² after dividing by √d_k."""
    c = m.case
    sq, sk = float(m.values("standard", "var_q").mean()), float(m.values("standard", "var_k").mean())
    premise = _premise_note(c, "zero-mean independent q, k entries", zero_mean=True)
    note = f"d_k = {c.head_dim}, σ_q² = {sq:.4f}, σ_k² = {sk:.4f}"
    rows = []
    for name, statistic, factor, text in (
        ("var_qk", "var_scores", c.head_dim, "Var(q·k) = d_k·σ_q²·σ_k² over token pairs i ≠ j"),
        ("var_qk_scaled", "var_scores_scaled", 1, "Var(q·k / √d_k) = σ_q²·σ_k² (= 1 for unit-variance entries)"),
    ):
        expected = factor * sq * sk
        measured, sd = _mean_sd(m.values("standard", statistic))
        row = ClaimRow(name, text, SCALE, c.case_id, expected, measured, sd, "±10 %", "", note)
        rows.append(_checked(row, abs(measured / expected - 1) <= VARIANCE_TOLERANCE, premise))
    return rows


def saturation(m: CaseMeasurement) -> list[ClaimRow]:
    """Row entropy against ln L − v/2, scaled (v ≈ 1) and unscaled (v ≈ d_k, where the formula breaks)."""
    c = m.case
    rows = []
    for variant, logits in (("standard", "var_scores_scaled"), ("unscaled", "var_scores")):
        v = float(m.values("standard", logits).mean())
        expected = theory.softmax_entropy(c.seq_len, v)
        measured, sd = _mean_sd(m.values(variant, "entropy"))
        row_max, dead = (float(m.values(variant, s).mean()) for s in ("row_max", "dead_gradient_share"))
        note = f"Var(logits) = {v:.3g}; row max {row_max:.3f}; dead-gradient share {dead:.3f}"
        premise = _premise_note(c, "i.i.d. Gaussian logits", zero_mean=True)
        if premise is None and not theory.entropy_formula_applies(c.seq_len, v):
            correction = theory.entropy_correction(c.seq_len, v)
            premise = f"finite-L correction {correction:.3g} nats ≥ {theory.ENTROPY_CORRECTION_LIMIT}: L ≪ e^Var fails"
        label = "scaled" if variant == "standard" else "unscaled"
        text = f"{label} softmax row entropy = ln L − Var(logits)/2" + (" ≈ ln L − ½" if variant == "standard" else "")
        row = ClaimRow(f"entropy_{label}", text, SCALE, c.case_id, expected, measured, sd, "±0.05 nats", "", note)
        rows.append(_checked(row, abs(measured - expected) <= ENTROPY_TOLERANCE_NATS, premise))
    return rows


def rank(m: CaseMeasurement) -> list[ClaimRow]:
    """rank(S) = min(d_k, L) for inputs and weights in general position; effective rank of P as INFO."""
    c = m.case
    bound = min(c.head_dim, c.seq_len)
    values = m.values("standard", "rank_scores")
    row = ClaimRow(
        claim="rank_scores",
        statement="rank(S) = min(d_k, L): a head of width d_k < L cannot express every pattern",
        source=RANK,
        case=c.case_id,
        theory=float(bound),
        measured=_mean_sd(values)[0],
        sd=_mean_sd(values)[1],
        tolerance="exact",
        verdict="",
        note=f"d_k = {c.head_dim}, L = {c.seq_len}",
    )
    effective = m.values("standard", "effective_rank_probs")
    info = ClaimRow(
        claim="effective_rank_probs",
        statement="effective rank of P (Roy & Vetterli 2007)",
        source=RANK,
        case=c.case_id,
        theory=None,
        measured=_mean_sd(effective)[0],
        sd=_mean_sd(effective)[1],
        tolerance="—",
        verdict=INFO,
        note=f"out of L = {c.seq_len}",
    )
    return [_checked(row, bool(np.all(values == bound)), _premise_note(c, "general position")), info]


def _shared_row(m: CaseMeasurement, claim: str, statement: str, statistic: str, **fields: object) -> ClaimRow:
    """A claim about the shared-W_Q = W_K scores: measured is the mean ± sd of ``statistic`` over heads and draws."""
    measured, sd = _mean_sd(m.values("shared_qk", statistic))
    return ClaimRow(claim=claim, statement=statement, case=m.case.case_id, measured=measured, sd=sd, **fields)


def diagonal(m: CaseMeasurement) -> list[ClaimRow]:
    """Shared W_Q = W_K: symmetric PSD scores whose diagonal is favoured, but not always the winner."""
    shared, separate = m.values("shared_qk", "diag_argmax_share"), m.values("standard", "diag_argmax_share")
    other, other_sd = _mean_sd(separate)
    z_shared, z_separate = (float(m.values(v, "diag_z").mean()) for v in ("shared_qk", "standard"))
    violations = m.values("shared_qk", "cauchy_schwarz_violations")
    asym = m.values("shared_qk", "asymmetry")
    return [
        _shared_row(
            m,
            "diag_shared_vs_separate",
            "shared W_Q = W_K: more rows peak on their own token than separate W_Q, W_K",
            "diag_argmax_share",
            source=SHARED,
            theory=f"> {other:.4f}",
            tolerance="strictly greater",
            verdict=PASS if shared.mean() > other else FAIL,
            note=f"separate {other:.4f} ± {other_sd:.4f}; diagonal z: shared {z_shared:.2f}, separate {z_separate:.2f}",
        ),
        _shared_row(
            m,
            "diag_always_wins",
            "shared W_Q = W_K: every token's own key gets its row's highest score",
            "diag_argmax_share",
            source=SHARED,
            theory=1.0,
            tolerance="exact",
            verdict=PASS if np.all(shared == 1) else FAIL,
            note="PSD bounds S_ij by √(S_ii·S_jj); it does not make the diagonal win",
        ),
        _shared_row(
            m,
            "psd_bound",
            "shared W_Q = W_K: S_ij ≤ √(S_ii·S_jj) (S = Q Qᵀ is positive semi-definite)",
            "cauchy_schwarz_violations",
            source="performance-model.md; Cauchy–Schwarz",
            theory=0.0,
            tolerance="1e-9 of max |S|",
            verdict=PASS if np.all(violations == 0) else FAIL,
            note="share of pairs i ≠ j that break the bound",
        ),
        _shared_row(
            m,
            "symmetric_shared",
            "shared W_Q = W_K: S = Sᵀ",
            "asymmetry",
            source=SHARED,
            theory=0.0,
            tolerance="≤ 1e-12",
            verdict=PASS if np.all(asym <= 1e-12) else FAIL,
            note=f"‖S − Sᵀ‖/‖S‖; separate W_Q, W_K: {m.values('standard', 'asymmetry').mean():.3f}",
        ),
    ]


def jl(m: CaseMeasurement) -> list[ClaimRow]:
    """Each head's query projection against the distortion ε the lemma guarantees for d_k and n = L tokens."""
    c = m.case
    values = m.values("standard", "jl_distortion")
    eps = theory.jl_epsilon(c.head_dim, c.seq_len)
    premise = _premise_note(c, "a random projection")
    if premise is None and eps is None:
        bound = theory.jl_no_guarantee_below(c.seq_len)
        premise = f"no ε < 1 for d_k = {c.head_dim} < 24·ln {c.seq_len} = {bound:.0f}"
    row = ClaimRow(
        claim="jl_distortion",
        statement="each head's projection keeps every squared token distance within 1 ± ε",
        source=JL,
        case=c.case_id,
        theory=eps,
        measured=float(values.max()),
        sd=_mean_sd(values)[1],
        tolerance="measured ≤ ε",
        verdict="",
        note="worst pair over heads and draws; ε from k ≥ 4·ln n / (ε²/2 − ε³/3)",
    )
    return [_checked(row, eps is not None and float(values.max()) <= eps, premise)]


def _weight_count(c: ProbeCase) -> int:
    """Seed 000 / 001: 2·D·q_dim + 2·D·kv_dim matrices (+ biases), whatever the number of heads (q_dim = h·d_k,
    D unless head_dim is set apart)."""
    kv_dim, q_dim = c.kv_heads * c.head_dim, c.heads * c.head_dim
    return 2 * c.d_model * (q_dim + kv_dim) + (c.d_model + q_dim + 2 * kv_dim if c.bias else 0)


def equivalence(m: CaseMeasurement) -> list[ClaimRow]:
    """Packed QKV and 3h per-head matrices: the same output and the same parameters."""
    c = m.case
    err = m.values("layer", "max_rel_err")
    fused, per_head = m.values("layer", "params_fused"), m.values("layer", "params_per_head")
    expected = float(m.values("layer", "params_weights").max()) if c.trained else float(_weight_count(c))
    same = bool(np.all(fused == expected) and np.all(per_head == expected))
    return [
        ClaimRow(
            claim="same_output",
            statement="packed QKV + view and 3h per-head matrices compute the same function",
            source=LAYOUT,
            case=c.case_id,
            theory=0.0,
            measured=float(err.max()),
            sd=_mean_sd(err)[1],
            tolerance="≤ 1e-10 (float64)",
            verdict=PASS if err.max() <= EQUIVALENCE_TOLERANCE else FAIL,
            note="max |packed − per-head| / max |per-head|",
        ),
        ClaimRow(
            claim="same_params",
            statement="both layouts hold 2·D² + 2·D·kv_dim weights (4·D² for MHA) whatever h",
            source=f"{LAYOUT}; seed 000 §1",
            case=c.case_id,
            theory=expected,
            measured=float(per_head.max()),
            sd=0.0,
            tolerance="exact",
            verdict=PASS if same else FAIL,
            note=f"fused {int(fused.max()):,}, per_head {int(per_head.max()):,}",
        ),
    ]


TRAINED_CLAIMS = [
    ("sparsity", "attention is sparse: each token attends to very few others", SPARSE, "top_k_mass"),
    ("self_attention", "a single head tends to attend to its own token", SPARSE, "self_attention_ratio"),
    ("head_redundancy", "most heads are redundant and can be pruned", PRUNE, "masked_head_change"),
]
"""Claims only trained weights can answer: INFO per case on a weights file, UNTESTABLE once per scenario otherwise."""


def trained(m: CaseMeasurement) -> list[ClaimRow]:
    """Sparsity, self-attention and head redundancy of trained weights (none for random ones: see scenario_claims)."""
    c = m.case
    if not c.trained:
        return []
    k = max(1, c.seq_len // TOP_K_SHARE)
    notes = {
        "top_k_mass": f"mass on the top {k} of {c.seq_len} keys (uniform {k / c.seq_len:.3f})",
        "self_attention_ratio": "P_ii × L (uniform = 1)",
        "masked_head_change": "‖y − y without head h‖ / ‖y‖ per head",
    }
    rows = []
    for name, text, source, statistic in TRAINED_CLAIMS:
        values = m.values("standard", statistic)
        per_head = values.mean(axis=-1)
        note = f"{notes[statistic]}; heads range {per_head.min():.3f} – {per_head.max():.3f}"
        rows.append(ClaimRow(name, text, source, c.case_id, None, *_mean_sd(values), "—", INFO, note))
    return rows


CASE_CLAIMS: dict[str, Callable[[CaseMeasurement], list[ClaimRow]]] = {
    "var_qk": var_qk,
    "saturation": saturation,
    "rank": rank,
    "diagonal": diagonal,
    "jl": jl,
    "equivalence": equivalence,
    "trained": trained,
}


def case_claims(m: CaseMeasurement) -> list[ClaimRow]:
    """Every claim group the case's scenario asks for, in its order."""
    return [row for group in m.case.claims for row in CASE_CLAIMS[group](m)]


# --- claims across the cases of a scenario -------------------------------------------------------


def _trend_group(case: ProbeCase) -> tuple[object, ...]:
    """Cases that differ only in head width (d_model, heads, kv_heads) form one trend."""
    weights = case.weights.path if case.weights else None
    return (case.scenario, case.batch, case.seq_len, case.bias, case.heads // case.kv_heads, weights)


def _trend_verdict(series: list[float], shape: str) -> bool:
    if shape == "flat":
        return max(series) - min(series) <= TREND_TOLERANCE
    steps_ok = all(b - a >= -TREND_TOLERANCE for a, b in itertools.pairwise(series))
    return steps_ok and series[-1] - series[0] > TREND_TOLERANCE


def scenario_claims(measurements: list[CaseMeasurement]) -> list[ClaimRow]:
    """The claims about a scenario as a whole: the saturation trends, and what its random weights cannot answer."""
    random = [m.case for m in measurements if "trained" in m.case.claims and not m.case.trained]
    why = "random weights say nothing about what training learns; give weights: a .safetensors file"
    untestable = [
        ClaimRow(name, text, source, random[0].scenario, None, None, None, "—", UNTESTABLE, why)
        for name, text, source, _ in (TRAINED_CLAIMS if random else [])
    ]
    return trend_claims(measurements) + untestable


def trend_claims(measurements: list[CaseMeasurement]) -> list[ClaimRow]:
    """Saturation and dead gradients rise with d_k unscaled and stay flat scaled (one row per group and series)."""
    rows = []
    groups: dict[tuple[object, ...], list[CaseMeasurement]] = {}
    for m in (m for m in measurements if "saturation" in m.case.claims):
        groups.setdefault(_trend_group(m.case), []).append(m)
    for members in groups.values():
        members.sort(key=lambda m: m.case.head_dim)
        first = members[0].case
        widths = [m.case.head_dim for m in members]
        label = f"{first.scenario}/b{first.batch}-n{first.seq_len} d_k " + " → ".join(map(str, widths))
        for variant, statistic, shape, what in (
            ("unscaled", "row_max", "rises", "unscaled: mean row max rises with d_k"),
            ("standard", "row_max", "flat", "scaled: mean row max stays flat as d_k grows"),
            ("unscaled", "dead_gradient_share", "rises", "unscaled: dead-gradient share rises with d_k"),
            ("standard", "dead_gradient_share", "flat", "scaled: dead-gradient share stays flat as d_k grows"),
        ):
            series = [float(m.values(variant, statistic).mean()) for m in members]
            measured = " → ".join(f"{value:.3f}" for value in series)
            row = ClaimRow(
                f"trend_{variant}_{statistic}",
                what,
                SCALE,
                label,
                shape,
                measured,
                None,
                f"±{TREND_TOLERANCE}",
                "",
                "Jacobian norm ‖diag p − p pᵀ‖_F < 0.01 counts as dead" if statistic == "dead_gradient_share" else "",
            )
            premise = _premise_note(first, "i.i.d. Gaussian logits", zero_mean=True)
            if premise is None and len(set(widths)) < 2:
                premise = "needs at least two head widths in the sweep"
            rows.append(_checked(row, _trend_verdict(series, shape), premise))
    return rows


# --- claims without a measurement -----------------------------------------------------------------


def run_claims() -> list[ClaimRow]:
    """Listed once per run: the seed's JL figure (outside the lemma) and the claims that need training."""
    seed_bound = 8 * math.log(8192)
    honest = theory.jl_min_dim(0.5, 8192)
    needs_training = [
        ("shared_qk_quality", "sharing W_Q = W_K costs 1–2 BLEU", SHARED),
        ("unscaled_training", "without 1/√d_k training is unstable and converges more slowly", SCALE),
        ("dot_vs_additive_quality", "dot-product attention is better than additive attention", "seed 004 §3"),
        ("heads_specialise", "heads learn different roles (positional, syntactic, rare-word heads)", PRUNE),
        (
            "memorization_capacity",
            "memorization capacity grows as Θ(H·n) with the number of heads",
            "seed 002 view 4 (arXiv 2306.02010)",
        ),
    ]
    return [
        ClaimRow(
            "jl_seed_bound",
            "d_k > 8·ln m / ε² ≈ 72 suffices for m = 8192 tokens",
            "seed 002 view 3",
            "—",
            seed_bound,
            None,
            None,
            "—",
            NO_GUARANTEE,
            f"the seed takes ε = 1, outside the lemma (0 < ε < 1); at ε = 0.5, m = 8192 needs k ≥ {honest:.0f}",
        ),
        *(
            ClaimRow(name, text, source, "—", None, None, None, "—", UNTESTABLE, "needs training")
            for name, text, source in needs_training
        ),
    ]
