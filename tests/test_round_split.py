"""A lead whose rounds disagree is reported as such (unstable, time it again), never as a tie: on made-up rows
and on the H100 counters run, where `fused` at n=1024 causal was 2.5× faster in 6 of 8 rounds and slower in 2."""

from __future__ import annotations

import pytest
from shared_runs import recorded

from mhabench.analysis.advice.pick import CANNOT_TELL, TIED, WINNER, round_split
from mhabench.analysis.estimate import row_ratio
from mhabench.results.columns import SAMPLES_COLUMN
from mhabench.views.wording import reason

COUNTERS_RUN = "20261127T074353Z-default-gpu-counters-partial"


def row(impl: str, times_ms: list[float]) -> dict[str, object]:
    return {
        "impl": impl,
        "status": "ok",
        "rounds_id": "r1",
        SAMPLES_COLUMN: times_ms,
        "latency_ms": sorted(times_ms)[4],
    }


def test_a_clear_median_lead_with_rounds_the_other_way_is_a_split() -> None:
    fused = row("fused", [0.217, 0.213, 0.217, 0.576, 0.554, 0.217, 0.216, 0.217])  # the H100's samples
    naive = row("naive", [0.552, 0.550, 0.551, 0.551, 0.548, 0.553, 0.552, 0.551])
    split = round_split(fused, naive, row_ratio(naive, fused))
    assert split is not None and (split["ahead"], split["behind"], split["rounds"]) == (6, 2, 8)
    assert split["ahead_ratio"] == pytest.approx(2.55, abs=0.02)
    said = reason("rounds_disagree", split, "fused")
    assert said.startswith("rounds disagree: `fused` was 2.55× faster than `naive` in 6 of 8 rounds")


def test_a_noisy_tie_is_no_split() -> None:
    """Rounds either side of 1 around a median near 1: a tie, whatever the noise."""
    fused = row("fused", [1.00, 1.05, 0.96, 1.02, 0.99, 1.04, 0.97, 1.01])
    naive = row("naive", [1.01, 0.98, 1.03, 0.99, 1.02, 0.97, 1.04, 1.00])
    assert round_split(fused, naive, row_ratio(naive, fused)) is None


def test_a_clear_lead_in_every_round_is_no_split() -> None:
    fused = row("fused", [1.0] * 8)
    naive = row("naive", [2.0, 2.1, 1.9, 2.0, 2.05, 1.95, 2.0, 2.0])
    assert round_split(fused, naive, row_ratio(naive, fused)) is None


def test_the_recorded_flipped_case_says_rounds_disagree_not_tied() -> None:
    from mhabench.analysis.advice.answers import answer
    from mhabench.results.store import load_run

    picks = answer(load_run(recorded(COUNTERS_RUN))).picks
    flipped = next(one for case_id, one in picks.items() if case_id.endswith("b1-n1024-d4096-h32-bfloat16-causal"))
    assert flipped.verdict == CANNOT_TELL and flipped.verdict != TIED
    assert (flipped.reason_figures["ahead"], flipped.reason_figures["behind"]) == (6, 2)
    said = reason(flipped.reason_code, flipped.reason_figures, flipped.impls[0])
    assert said.startswith("rounds disagree: `fused` was 2.55× faster than `naive` in 6 of 8 rounds")
    assert "slower in 2" in said and "unstable" in said
    steady = [one for case_id, one in picks.items() if case_id.endswith("n4096-d4096-h32-bfloat16")]
    assert steady and all(one.verdict == WINNER for one in steady)  # the other cases keep their answer
