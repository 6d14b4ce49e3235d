"""Theory values and verdict rules, on hand-made measurements so every verdict can be forced."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mhabench.probe import attention_stats as stats
from mhabench.probe import claims, theory
from mhabench.probe.claims import FAIL, INFO, NO_GUARANTEE, PASS, UNTESTABLE
from mhabench.probe.config import ProbeCase, WeightsFile
from mhabench.probe.measure import CaseMeasurement


def test_jl_bound_of_dasgupta_and_gupta() -> None:
    # k ≥ 4·ln m / (ε²/2 − ε³/3): at ε = ½ the denominator is 1/8 − 1/24 = 1/12, so k ≥ 48·ln m
    assert theory.jl_min_dim(0.5, 8192) == pytest.approx(48 * math.log(8192))  # ≈ 432.5
    assert round(theory.jl_min_dim(0.5, 512)) == 299
    with pytest.raises(ValueError, match="0 < ε < 1"):
        theory.jl_min_dim(1.0, 8192)  # the seed's ε = 1 is outside the lemma


def test_jl_epsilon_inverts_the_bound_and_gives_up_below_24_ln_n() -> None:
    assert theory.jl_epsilon(433, 8192) == pytest.approx(0.5, abs=1e-3)
    assert theory.jl_min_dim(theory.jl_epsilon(300, 128), 128) == pytest.approx(300)
    assert theory.jl_no_guarantee_below(128) == pytest.approx(24 * math.log(128))  # ≈ 116.4
    assert theory.jl_epsilon(116, 128) is None
    assert theory.jl_epsilon(117, 128) is not None


def test_softmax_entropy_and_where_it_applies() -> None:
    assert theory.softmax_entropy(128, 1.0) == pytest.approx(math.log(128) - 0.5)
    # (v·e^v − (e^v − 1)/2) / L at v = 1: (e − (e − 1)/2) / 128 ≈ 0.0145
    assert theory.entropy_correction(128, 1.0) == pytest.approx((math.e - (math.e - 1) / 2) / 128)
    assert theory.entropy_formula_applies(128, 1.0)
    assert not theory.entropy_formula_applies(64, 1.0)  # 0.029 ≥ 0.025
    assert not theory.entropy_formula_applies(128, 16.0)  # unscaled d_k = 16: e^16 ≫ L


def test_the_entropy_correction_matches_a_simulation() -> None:
    """Rows of 128 i.i.d. N(0, 1) logits sit above ln L − ½ by about the predicted 1/L term, not below."""
    logits = torch.randn(4000, 128, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    excess = stats.row_entropy(logits.softmax(dim=-1)).item() - theory.softmax_entropy(128, 1.0)
    assert 0 < excess < theory.ENTROPY_CORRECTION_LIMIT
    assert excess == pytest.approx(theory.entropy_correction(128, 1.0), rel=0.35)


def _case(head_dim: int = 16, seq_len: int = 128, bias: bool = False, trained: bool = False) -> ProbeCase:
    weights = WeightsFile(path=Path("w.safetensors")) if trained else None
    return ProbeCase("s", 1, seq_len, 4 * head_dim, 4, 4, bias, 0, 2, ("var_qk",), weights)


def _per_head(value: float | list[float]) -> np.ndarray:
    """A value, or one per head, as (1 layer, 4 heads, 2 draws)."""
    array = np.asarray(value, dtype=float)
    return np.broadcast_to(array.reshape(1, -1, 1) if array.ndim else array, (1, 4, 2))


def _measurement(case: ProbeCase, **stats: float | list[float]) -> CaseMeasurement:
    """Every statistic given as variant__name=value."""
    values = {(key.split("__")[0], key.split("__")[1]): _per_head(value) for key, value in stats.items()}
    return CaseMeasurement(case, [0], values, {})


def _verdicts(rows: list[claims.ClaimRow]) -> dict[str, str]:
    return {row.claim: row.verdict for row in rows}


def test_var_qk_passes_within_ten_percent_and_fails_beyond() -> None:
    base = {"standard__var_q": 1.0, "standard__var_k": 1.0, "standard__var_scores_scaled": 1.05}
    good = _measurement(_case(), **base, standard__var_scores=17.0)  # 17 / 16 − 1 = 6 %
    bad = _measurement(_case(), **base, standard__var_scores=18.0)  # 12.5 %
    assert _verdicts(claims.var_qk(good)) == {"var_qk": PASS, "var_qk_scaled": PASS}
    assert _verdicts(claims.var_qk(bad))["var_qk"] == FAIL


@pytest.mark.parametrize(("bias", "trained"), [(True, False), (False, True)])
def test_var_qk_has_no_guarantee_without_its_premise(bias: bool, trained: bool) -> None:
    m = _measurement(
        _case(bias=bias, trained=trained),
        standard__var_q=1,
        standard__var_k=1,
        standard__var_scores=99,
        standard__var_scores_scaled=9,
    )
    rows = claims.var_qk(m)
    assert {row.verdict for row in rows} == {NO_GUARANTEE}
    assert ("bias" if bias else "trained") in rows[0].note


def test_entropy_claim_applies_to_scaled_scores_only() -> None:
    expected = math.log(128) - 0.5
    m = _measurement(
        _case(),
        standard__var_scores=16,
        standard__var_scores_scaled=1,
        standard__entropy=expected + 0.01,
        unscaled__entropy=1.6,
        standard__row_max=0.07,
        unscaled__row_max=0.5,
        standard__dead_gradient_share=0,
        unscaled__dead_gradient_share=0.01,
    )
    verdicts = _verdicts(claims.saturation(m))
    assert verdicts == {"entropy_scaled": PASS, "entropy_unscaled": NO_GUARANTEE}


def test_rank_must_equal_the_bound_in_every_head_and_draw() -> None:
    stats = {"standard__effective_rank_probs": 10.0}
    assert _verdicts(claims.rank(_measurement(_case(), **stats, standard__rank_scores=16)))["rank_scores"] == PASS
    one_low = _measurement(_case(), **stats, standard__rank_scores=[16, 16, 16, 15])
    assert _verdicts(claims.rank(one_low)) == {"rank_scores": FAIL, "effective_rank_probs": INFO}


def test_diagonal_claims() -> None:
    m = _measurement(
        _case(),
        shared_qk__diag_argmax_share=0.9,
        standard__diag_argmax_share=0.01,
        shared_qk__diag_z=3,
        standard__diag_z=0,
        shared_qk__cauchy_schwarz_violations=0,
        shared_qk__asymmetry=0,
        standard__asymmetry=1.4,
    )
    assert _verdicts(claims.diagonal(m)) == {
        "diag_shared_vs_separate": PASS,
        "diag_always_wins": FAIL,  # the seed's "a token's own key always wins": 90 % is not always
        "psd_bound": PASS,
        "symmetric_shared": PASS,
    }


def test_jl_claim_needs_enough_dimensions() -> None:
    small = claims.jl(_measurement(_case(head_dim=16), standard__jl_distortion=2.5))[0]
    assert small.verdict == NO_GUARANTEE and "24·ln 128" in small.note
    eps = theory.jl_epsilon(256, 128)
    assert claims.jl(_measurement(_case(head_dim=256), standard__jl_distortion=eps - 0.01))[0].verdict == PASS
    assert claims.jl(_measurement(_case(head_dim=256), standard__jl_distortion=eps + 0.01))[0].verdict == FAIL


def test_trained_weight_claims_are_untestable_on_random_weights() -> None:
    assert claims.trained(_measurement(_case())) == []
    random = [_measurement(dataclasses.replace(_case(head_dim=d), claims=("trained",))) for d in (16, 64)]
    rows = claims.scenario_claims(random)  # once per scenario, not once per case
    assert [(row.claim, row.verdict, row.case) for row in rows] == [
        ("sparsity", UNTESTABLE, "s"),
        ("self_attention", UNTESTABLE, "s"),
        ("head_redundancy", UNTESTABLE, "s"),
    ]
    m = _measurement(
        _case(trained=True),
        standard__top_k_mass=0.6,
        standard__self_attention_ratio=2,
        standard__masked_head_change=0.3,
    )
    assert {row.verdict for row in claims.trained(m)} == {INFO}


def _trend_case(head_dim: int, row_max_unscaled: float, dead_unscaled: float, row_max: float = 0.07) -> CaseMeasurement:
    case = ProbeCase("s", 1, 128, 256, 256 // head_dim, 256 // head_dim, False, 0, 2, ("saturation",))
    values = {
        ("unscaled", "row_max"): row_max_unscaled,
        ("standard", "row_max"): row_max,
        ("unscaled", "dead_gradient_share"): dead_unscaled,
        ("standard", "dead_gradient_share"): 0.0,
    }
    heads = {key: np.full((1, case.heads, 2), value) for key, value in values.items()}
    return CaseMeasurement(case, [0], heads, {})


def test_trends_rise_unscaled_and_stay_flat_scaled() -> None:
    cases = [_trend_case(256, 0.9, 0.4), _trend_case(16, 0.5, 0.0), _trend_case(64, 0.75, 0.1)]
    rows = claims.trend_claims(cases)
    assert {row.verdict for row in rows} == {PASS}
    assert rows[0].measured == "0.500 → 0.750 → 0.900"  # sorted by d_k
    falling = claims.trend_claims([_trend_case(16, 0.9, 0.0), _trend_case(64, 0.5, 0.0, row_max=0.2)])
    assert _verdicts(falling) == {
        "trend_unscaled_row_max": FAIL,
        "trend_standard_row_max": FAIL,
        "trend_unscaled_dead_gradient_share": FAIL,  # flat is not a rise
        "trend_standard_dead_gradient_share": PASS,
    }


def test_a_single_head_width_has_no_trend() -> None:
    assert {row.verdict for row in claims.trend_claims([_trend_case(16, 0.5, 0.0)])} == {NO_GUARANTEE}


def test_run_claims_list_the_seed_jl_figure_and_the_training_claims() -> None:
    rows = claims.run_claims()
    seed = rows[0]
    assert seed.verdict == NO_GUARANTEE and seed.theory == pytest.approx(8 * math.log(8192))
    assert "k ≥ 433" in seed.note
    assert {row.verdict for row in rows[1:]} == {UNTESTABLE}
