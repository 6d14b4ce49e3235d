"""Timed claims as data: the block parser, the grading rule of each kind on synthetic readings, the level of
evidence two sittings support, and the sentences rendered from blocks and reports."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from mhabench.errors import InputError
from mhabench.findings.check import TABLE_END, TABLE_START, rendered_page, rendered_readme
from mhabench.findings.claims import Claim, Kind, parse_page
from mhabench.findings.grade import Grade, Level, evidence, grade
from mhabench.findings.prose import claim_text, readme_table, statement
from mhabench.findings.reading import CaseReading, Speedup, matches
from mhabench.findings.report import ClaimRecord, GradeRecord, Report, RunRecord

BLOCK = """intro
<!-- claim
id: gqa-b256
config: configs/decode_batch_sweep.yaml
case: {kv_heads: 2, batch: 256}
kind: ratio
impls: [fused, naive]
figure: [2.0, 3.0]
-->
whatever was typed here
<!-- /claim -->
outro
"""


def claim(kind: str, impls: list[str], figure: list[float | None] | None = None) -> Claim:
    spec = {"id": "c", "config": "configs/x.yaml", "case": {"heads": 8}, "kind": kind, "impls": impls}
    return Claim.model_validate(spec | ({"figure": figure} if figure is not None else {}))


def speedup(faster: str, slower: str, ratio: float, low: float, high: float, per: tuple[float, ...] = ()) -> Speedup:
    clearly = math.isfinite(low) and low > 1 and ratio >= 1.03
    return Speedup(faster, slower, ratio, low, high, clearly, per or (ratio, ratio, ratio))


def reading(
    verdict: str, picked: tuple[str, ...], leads: dict[tuple[str, str], tuple[float, float, float]]
) -> CaseReading:
    """A case whose pairwise speedups are ``leads`` (each given one way; the other way is the reciprocal)."""
    speedups = {}
    for (a, b), (ratio, low, high) in leads.items():
        speedups[(a, b)] = speedup(a, b, ratio, low, high)
        speedups[(b, a)] = speedup(b, a, 1 / ratio, 1 / high, 1 / low)
    impls = tuple(dict.fromkeys(name for pair in leads for name in pair))
    return CaseReading("r", "n=512 h=8", verdict, picked, impls, speedups)


FUSED_WINS = reading("winner", ("fused",), {("fused", "naive"): (1.5, 1.4, 1.6)})
TIED = reading("tied", ("fused", "naive"), {("fused", "naive"): (1.05, 0.9, 1.2)})


def test_a_block_parses_into_its_claim_and_sentence() -> None:
    (block,) = parse_page(BLOCK)
    assert block.claim.kind == Kind.RATIO and block.claim.case == {"kv_heads": 2, "batch": 256}
    assert block.claim.figure == (2.0, 3.0) and block.text == "whatever was typed here\n"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (BLOCK.replace("kind: ratio", "kind: fastest"), "kind"),
        (BLOCK.replace("figure: [2.0, 3.0]\n", ""), "needs a figure"),
        (BLOCK.replace("figure: [2.0, 3.0]", "figure: [3.0, 2.0]"), "not a range"),
        (BLOCK.replace("impls: [fused, naive]", "impls: [fused]"), "implementations"),
        (BLOCK.replace("<!-- /claim -->", ""), "no '<!-- /claim -->'"),
        (BLOCK + BLOCK, "used twice"),
        (BLOCK.replace("case: {", "case: {{"), "claim block"),
    ],
)
def test_a_bad_block_is_one_input_error(spec: str, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        parse_page(spec)


def test_case_fields_match_by_value() -> None:
    assert matches({"heads": 8, "batch": 1, "causal": False}, {"heads": 8.0, "causal": False})
    assert not matches({"heads": 8, "causal": False}, {"causal": 0})
    assert not matches({"heads": 8}, {"kv_heads": 8})


@pytest.mark.parametrize(
    ("stated", "case", "expected"),
    [
        (claim("winner", ["fused"]), FUSED_WINS, Grade.HOLDS),
        (claim("winner", ["naive"]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("winner", ["fused"]), TIED, Grade.CANNOT_TELL),
        (claim("winner", ["naive"]), TIED, Grade.CANNOT_TELL),
        (claim("tie", ["fused", "naive"]), TIED, Grade.HOLDS),
        (claim("tie", ["naive", "fused"]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("ratio", ["fused", "naive"], [1.3, 1.7]), FUSED_WINS, Grade.HOLDS),
        (claim("ratio", ["fused", "naive"], [1.45, 1.7]), FUSED_WINS, Grade.HOLDS_WIDER),
        (claim("ratio", ["fused", "naive"], [1.6, 2.0]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("ratio", ["naive", "fused"], [0.6, 0.75]), FUSED_WINS, Grade.HOLDS),
        (claim("slowest", ["naive"]), FUSED_WINS, Grade.HOLDS),
        (claim("slowest", ["fused"]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("slowest", ["naive"]), TIED, Grade.CANNOT_TELL),
        (claim("ordering", ["fused", "naive"]), FUSED_WINS, Grade.HOLDS),
        (claim("ordering", ["naive", "fused"]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("every_process", ["fused", "naive"], [1.0, None]), FUSED_WINS, Grade.HOLDS),
        (claim("every_process", ["fused", "naive"], [1.0, 1.2]), FUSED_WINS, Grade.DOES_NOT_HOLD),
        (claim("winner", ["per_head"]), FUSED_WINS, Grade.CANNOT_TELL),
        (claim("winner", ["fused"]), None, Grade.CANNOT_TELL),
    ],
)
def test_each_kind_grades_what_the_run_shows(stated: Claim, case: CaseReading | None, expected: Grade) -> None:
    assert grade(stated, case).grade == expected


def test_the_ordering_needs_every_step_clear() -> None:
    three = reading(
        "winner",
        ("fused",),
        {
            ("fused", "naive"): (1.5, 1.4, 1.6),
            ("naive", "per_head"): (1.02, 0.9, 1.1),
            ("fused", "per_head"): (1.6, 1.5, 1.7),
        },
    )
    assert grade(claim("ordering", ["fused", "naive", "per_head"]), three).grade == Grade.CANNOT_TELL
    assert grade(claim("ordering", ["fused", "per_head", "naive"]), three).grade == Grade.CANNOT_TELL
    assert grade(claim("ordering", ["naive", "fused", "per_head"]), three).grade == Grade.DOES_NOT_HOLD


def test_every_process_reads_each_process_not_the_interval() -> None:
    one_slow = CaseReading(
        "r",
        "x",
        "winner",
        ("fused",),
        ("fused", "naive"),
        {("fused", "naive"): Speedup("fused", "naive", 1.3, 1.1, 1.5, True, (1.4, 1.35, 0.98))},
    )
    assert grade(claim("every_process", ["fused", "naive"], [1.0, None]), one_slow).grade == Grade.DOES_NOT_HOLD
    two_processes = CaseReading(
        "r",
        "x",
        "winner",
        ("fused",),
        ("fused", "naive"),
        {("fused", "naive"): Speedup("fused", "naive", 1.3, 1.1, 1.5, True, (1.4, 1.35))},
    )
    assert grade(claim("every_process", ["fused", "naive"], [1.0, None]), two_processes).grade == Grade.CANNOT_TELL


AT = dt.datetime(2026, 11, 29, 7, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("grades", "level"),
    [
        ([(AT, Grade.HOLDS), (AT + dt.timedelta(minutes=70), Grade.HOLDS_WIDER)], Level.HELD),
        ([(AT, Grade.HOLDS), (AT + dt.timedelta(minutes=50), Grade.HOLDS)], Level.SEEN_ONCE),
        ([(AT, Grade.HOLDS)], Level.SEEN_ONCE),
        ([(AT, Grade.HOLDS), (AT + dt.timedelta(hours=2), Grade.CANNOT_TELL)], Level.SEEN_ONCE),
        ([(AT, Grade.HOLDS), (AT + dt.timedelta(hours=2), Grade.HOLDS), (AT, Grade.DOES_NOT_HOLD)], Level.DID_NOT_HOLD),
        ([], Level.SEEN_ONCE),
    ],
)
def test_a_claim_is_held_only_after_two_sittings_an_hour_apart(
    grades: list[tuple[dt.datetime, Grade]], level: Level
) -> None:
    assert evidence(grades) == level


def run_record(run_id: str, started: dt.datetime) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        config="x.yaml",
        started_at=started.isoformat(),
        commit="a" * 40,
        dirty=False,
        machine="Intel(R) Xeon(R) Processor, 2 threads",
        torch="2.13.0+cpu",
        processes=3,
    )


def grade_record(run_id: str, found: Grade) -> GradeRecord:
    return GradeRecord(
        run_id=run_id,
        grade=found,
        pair=("fused", "naive"),
        ratio=2.5,
        ci_low=2.1,
        ci_high=2.9,
        per_process=[2.2, 2.5, 2.8],
        picked="fused wins",
    )


def report(level: Level, grades: list[GradeRecord]) -> Report:
    (block,) = parse_page(BLOCK)
    runs = [run_record("20261129T073028Z-x", AT), run_record("20261129T084500Z-x", AT + dt.timedelta(minutes=75))]
    return Report(
        page="decode.md",
        checked_at=AT.isoformat(),
        runs=runs,
        claims=[ClaimRecord(claim=block.claim, grades=grades, level=level)],
    )


def test_the_sentence_is_rendered_from_the_block_and_the_report() -> None:
    held = report(
        Level.HELD, [grade_record("20261129T073028Z-x", Grade.HOLDS), grade_record("20261129T084500Z-x", Grade.HOLDS)]
    )
    page = rendered_page(BLOCK, held)
    assert "whatever was typed here" not in page
    assert "`fused` is 2.00–3.00× as fast as `naive` at kv_heads 2, batch 256. **Held** in two sittings" in page
    assert "`…073028Z`: `fused` 2.50× [2.10–2.90] over `naive` (processes 2.20–2.80×), holds" in page
    assert page.startswith("intro\n<!-- claim\n") and page.endswith("<!-- /claim -->\noutro\n")
    assert rendered_page(page, held) == page
    once = report(Level.SEEN_ONCE, [grade_record("20261129T073028Z-x", Grade.HOLDS)])
    assert ". **Seen once**, not yet held" in rendered_page(BLOCK, once)
    (block,) = parse_page(BLOCK)
    assert claim_text(None, block.claim).endswith(". Not checked yet.\n")


def test_a_flag_in_the_case_is_spelled_as_the_block_spells_it() -> None:
    causal = Claim(id="c", config="x.yaml", case={"seq_len": 256, "causal": True}, kind=Kind.WINNER, impls=["fused"])
    plain = causal.model_copy(update={"case": {"seq_len": 256, "causal": False}})
    assert claim_text(None, causal).startswith("`fused` wins at seq_len 256, causal true. ")
    assert claim_text(None, plain).startswith("`fused` wins at seq_len 256, causal false. ")


def test_the_readme_table_counts_levels_per_page() -> None:
    held = report(Level.HELD, [grade_record("20261129T073028Z-x", Grade.HOLDS)])
    table = readme_table([held])
    assert (
        "| [decode.md](decode.md) | 1 | 2026-11-29 (runs of 2026-11-29; Intel(R) Xeon(R) Processor, 2 threads) "
        "| 1 | 0 | 0 |" in table
    )
    readme = f"# x\n\n{TABLE_START}old\n{TABLE_END}\n\nrest\n"
    assert rendered_readme(readme, [held]) == f"# x\n\n{TABLE_START}{table}{TABLE_END}\n\nrest\n"
    with pytest.raises(InputError, match="markers"):
        rendered_readme("# x\n", [held])


def test_a_winner_the_run_ties_quotes_the_rival_it_is_tied_with() -> None:
    three = reading(
        "tied",
        ("fused", "torch_mha_fast"),
        {("fused", "torch_mha"): (4.4, 3.5, 5.5), ("fused", "torch_mha_fast"): (1.02, 0.95, 1.1)},
    )
    measured = grade(claim("winner", ["fused"]), three)
    assert measured.grade == Grade.CANNOT_TELL
    assert measured.pair == ("fused", "torch_mha_fast") and measured.ratio == pytest.approx(1.02)


def test_a_claim_that_fixes_threads_or_allocator_says_so() -> None:
    fixed = claim("winner", ["fused"]).model_copy(update={"threads": 1, "allocator": "system"})
    assert statement(fixed) == "`fused` wins at heads 8 (1 thread, allocator system)"
    assert statement(claim("winner", ["fused"])) == "`fused` wins at heads 8"
    with pytest.raises(ValueError, match="allocator"):
        Claim.model_validate({**claim("tie", ["a", "b"]).model_dump(), "allocator": "jemalloc"})
