"""The flip rate across runs of one config: a winner in one run that is clearly slower in another."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from synthetic_runs import ENVIRONMENT, rounds, row

from mhabench.analysis.advice.across import FLIPS, flipped_case, flips
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.advice.answers import answer
from mhabench.results.manifest import Manifest
from mhabench.results.store import Run, typed_rows
from mhabench.views.wording import sentence as text_of


def run_of(run_id: str, medians_by_n: dict[int, dict[str, float]]) -> Run:
    """One process; per seq_len the implementations' medians, timed in 20 tight shared rounds."""
    records = []
    for seq_len, medians in medians_by_n.items():
        times = rounds(medians, count=20, noise=0.002, seed=seq_len)
        records += [row(impl, times[impl], seq_len=seq_len, run_id=run_id) for impl in medians]
    return Run(
        Path(run_id),
        Manifest.model_validate({"run_id": run_id, "environment": ENVIRONMENT}),
        typed_rows(pd.DataFrame(records)),
    )


FUSED_WINS = {"naive": 1.5, "fused": 1.0}
NAIVE_WINS = {"naive": 1.0, "fused": 1.2}
TIE = {"naive": 1.0, "fused": 1.0}


def test_opposite_winners_flip_and_a_winner_beside_a_tie_does_not() -> None:
    first = answer(run_of("a", {128: FUSED_WINS, 512: FUSED_WINS, 2048: FUSED_WINS}))
    second = answer(run_of("b", {128: NAIVE_WINS, 512: TIE, 2048: FUSED_WINS}))
    picks = {
        n: [run.picks[case_id] for run in (first, second)]
        for n, case_id in zip((128, 512, 2048), first.picks, strict=True)
    }
    assert flipped_case(picks[128]) and not flipped_case(picks[512]) and not flipped_case(picks[2048])
    (found,) = flips([first, second])
    assert found.rule == FLIPS
    assert {name: found.figures[name] for name in ("runs", "cases", "flipped", "flip_rate")} == {
        "runs": 2,
        "cases": 3,
        "flipped": 1,
        "flip_rate": 1 / 3,
    }
    assert [one["case"] for one in found.figures["named"]] == ["n=128 h=4 d=64 b=1 float32"]
    assert "1 of the 3 cases" in text_of(found) and "flip rate 33 %" in text_of(found) and "n=128" in text_of(found)


def test_one_run_has_no_flip_statement_and_advise_adds_it_across_runs() -> None:
    one = run_of("a", {128: FUSED_WINS})
    assert flips([answer(one)]) == []
    across = advise([one, run_of("b", {128: FUSED_WINS})]).across
    assert [s.figures["flip_rate"] for s in across if s.rule == FLIPS] == [0.0]
