"""The findings can be replayed: every run a page cites is stored under docs/findings/runs/, and advise on
the stored folders gives the figures replication.md quotes."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from mhabench.analysis.advice.across import FLIPS
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.advice.pick import TIED, WINNER, Pick
from mhabench.analysis.calibration import calibration_of
from mhabench.analysis.compare import speedups
from mhabench.analysis.pooled_rows import pooled_rows
from mhabench.analysis.spread import speedup_spread
from mhabench.results.store import load_run

FINDINGS = Path(__file__).resolve().parents[1] / "docs" / "findings"
RUNS = FINDINGS / "runs"
RUN_ID = re.compile(r"\b[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9._-]*[A-Za-z0-9]")
UNSTORED_PAGES = {
    "gpu-h200.md",
}
"""Pages written before issue 26 from runs that were never kept (on VMs since gone). This set may only
shrink: a page re-run from now on stores its runs, and then every run id it cites is checked."""


def stored_ids() -> set[str]:
    return {path.name.removesuffix(".tar.xz") for path in RUNS.glob("*.tar.xz")}


def cited(page: Path) -> set[str]:
    return set(RUN_ID.findall(page.read_text()))


@pytest.mark.parametrize("page", sorted(p.name for p in FINDINGS.glob("*.md")))
def test_every_run_a_page_cites_is_stored(page: str) -> None:
    if page in UNSTORED_PAGES:
        pytest.skip(f"{page}: its runs were not kept (written before runs were stored)")
    missing = cited(FINDINGS / page) - stored_ids()
    assert not missing, f"{page} cites runs not under docs/findings/runs/: {sorted(missing)}"


def test_the_unstored_list_names_only_pages_that_exist() -> None:
    assert {p.name for p in FINDINGS.glob("*.md")} >= UNSTORED_PAGES
    assert "replication.md" not in UNSTORED_PAGES


def unpack(run_ids: list[str], into: Path) -> list[Path]:
    """The stored archives of ``run_ids`` unpacked under ``into``: one run folder each."""
    for run_id in run_ids:
        with tarfile.open(RUNS / f"{run_id}.tar.xz") as archive:
            archive.extractall(into, filter="data")
    return [into / run_id for run_id in run_ids]


def replication_runs(label: str) -> list[str]:
    """The run ids of one row of replication.md's "runs" table (``label`` is its first cell)."""
    text = (FINDINGS / "replication.md").read_text()
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {label} |") and RUN_ID.search(line)]
    return RUN_ID.findall(line)


@pytest.mark.parametrize(
    ("label", "flipped", "cases"),
    [
        ("default, one process", 0, 3),
        ("default, `--replicates 3`", 0, 3),
        ("models-replication, one process", 2, 6),
        ("models-replication, `--replicates 3`", 0, 6),
    ],
)
def test_advise_on_the_stored_runs_gives_the_flip_rates_replication_md_quotes(
    tmp_path: Path, label: str, flipped: int, cases: int
) -> None:
    run_ids = replication_runs(label)
    found = advise([load_run(path) for path in unpack(run_ids, tmp_path)])
    (statement,) = [s for s in found.across if s.rule == FLIPS]
    assert (statement.figures["flipped"], statement.figures["cases"]) == (flipped, cases)
    assert f"| {label} | {len(run_ids)} | {flipped} of {cases} |" in (FINDINGS / "replication.md").read_text()


def test_the_clear_case_is_resolved_in_every_replicated_default_run(tmp_path: Path) -> None:
    run_ids = replication_runs("default, `--replicates 3`")
    for advice in advise([load_run(path) for path in unpack(run_ids, tmp_path)]).runs:
        (largest,) = [pick for pick in advice.answers.picks.values() if pick.case.fields["seq_len"] == 2048]
        assert (largest.verdict, largest.impls) == (WINNER, ("fused",))


def cell(pick: Pick) -> str:
    """A pick as replication.md's per-case tables write it."""
    if pick.verdict == WINNER and pick.estimate is not None:
        estimate = pick.estimate
        return f"`{pick.impls[0]}` {estimate.ratio:.2f}× [{estimate.ci_low:.2f}–{estimate.ci_high:.2f}]"
    if pick.verdict == TIED:
        return "tied: " + ", ".join(f"`{impl}`" for impl in sorted(pick.impls))
    return pick.verdict


@pytest.mark.parametrize(
    "label",
    [
        "default, one process",
        "default, `--replicates 3`",
        "models-replication, one process",
        "models-replication, `--replicates 3`",
    ],
)
def test_every_pick_in_the_per_case_tables_is_what_advise_says_on_the_stored_runs(tmp_path: Path, label: str) -> None:
    found = advise([load_run(path) for path in unpack(replication_runs(label), tmp_path)])
    by_case = zip(*([cell(pick) for pick in run.answers.picks.values()] for run in found.runs), strict=True)
    text = (FINDINGS / "replication.md").read_text()
    rows = text.split(f"| {label} | run 1 |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert [line.split(" | ")[1:] for line in rows] == [[*cells[:-1], cells[-1] + " |"] for cells in by_case]


def test_the_calibrations_quoted_are_those_of_the_stored_replicated_runs(tmp_path: Path) -> None:
    runs = unpack(replication_runs("default, `--replicates 3`"), tmp_path)
    spreads = [f"{calibration_of(load_run(path)).between_process_spread:.1%}".replace("%", " %") for path in runs]
    assert ", ".join(spreads[:-1]) + f" and {spreads[-1]}" in " ".join(
        (FINDINGS / "replication.md").read_text().split()
    )


def test_the_calibration_sweep_quoted_is_the_stored_calibration_run(tmp_path: Path) -> None:
    (run_dir,) = unpack(["20261127T085726Z-calibration"], tmp_path)
    found = calibration_of(load_run(run_dir))
    assert f"{found.between_process_spread:.1%}" == "78.6%" and found.processes == 3
    (per_head,) = [r for r in found.ratios if r["impl"] == "per_head" and "n128" in r["case_id"]]
    assert [f"{ratio:.2f}" for ratio in per_head["by_process"]] == ["0.14", "9.09", "0.40"]
    assert "gave 78.6 %" in (FINDINGS / "replication.md").read_text()


def test_the_spread_at_n_128_quoted_is_that_of_the_first_replicated_default_run(tmp_path: Path) -> None:
    (run_dir,) = unpack(["20261127T091136Z-default"], tmp_path)
    (fused,) = [r for r in calibration_of(load_run(run_dir)).ratios if r["impl"] == "fused" and "n128" in r["case_id"]]
    low, high = min(fused["by_process"]), max(fused["by_process"])
    assert f"moved from {low:.1f}× to {high:.1f}×" in " ".join((FINDINGS / "replication.md").read_text().split())


def test_the_compile_times_quoted_are_those_of_the_stored_models_runs(tmp_path: Path) -> None:
    runs = [load_run(path) for path in unpack(replication_runs("models-replication, one process"), tmp_path)]
    seconds = [run.frame[run.frame["impl"] == "flex"]["compile_time_s"] for run in runs]
    cold, warm = seconds[0], pd.concat(seconds[1:])
    text = " ".join((FINDINGS / "replication.md").read_text().split())
    assert f"in {cold.min():.1f}–{cold.max():.1f} s per case" in text
    assert f"warm: {warm.min():.1f}–{warm.max():.1f} s per case" in text


def test_the_call_times_and_rounds_quoted_for_the_8b_models_at_1024(tmp_path: Path) -> None:
    runs = [load_run(path) for path in unpack(replication_runs("models-replication, one process"), tmp_path)]
    rows = pd.concat([run.frame for run in runs])
    large = rows[rows["case_id"].str.contains("n1024") & ~rows["scenario"].eq("gpt2") & rows["status"].eq("ok")]
    seconds, rounds = large["latency_ms"] / 1000, large["samples"].astype(int)
    text = " ".join((FINDINGS / "replication.md").read_text().split())
    assert f"a call took {seconds.min():.1f}–{seconds.max():.0f} s" in text
    assert f"left each row {rounds.min()} to {rounds.max()} rounds" in text


def test_the_coverages_quoted_are_those_of_the_test_model() -> None:
    from test_replication import coverage

    text = " ".join((FINDINGS / "replication.md").read_text().split())
    (three, pooled_three), (five, _) = coverage(3), coverage(5)
    assert (
        f"covered the true ratio in {three:.0%} of draws with 3 processes and {five:.0%} with 5".replace("%", " %")
        in text
    )
    assert f"pooled, in {pooled_three:.0%}".replace("%", " %") in text


def test_the_sixth_replicated_default_run_and_the_shipped_calibration_quoted(tmp_path: Path) -> None:
    default, calibration = unpack(["20261127T100806Z-default", "20261127T100922Z-calibration"], tmp_path)
    text = " ".join((FINDINGS / "replication.md").read_text().split())
    run = load_run(default)
    seconds = [
        (dt.datetime.fromisoformat(p["finished_at"]) - dt.datetime.fromisoformat(p["started_at"])).total_seconds()
        for p in run.manifest.as_dict()["replicated_from"]
    ]
    assert f"its processes {seconds[0]:.1f}, {seconds[1]:.1f} and {seconds[2]:.1f} s" in text
    (advice,) = advise([run]).runs
    (largest,) = [pick for pick in advice.answers.picks.values() if pick.case.fields["seq_len"] == 2048]
    assert (largest.verdict, set(largest.impls), largest.runner_up) == (TIED, {"fused", "per_head"}, "per_head")
    assert largest.estimate is not None
    estimate = largest.estimate
    assert f"{estimate.ratio:.2f}× [{estimate.ci_low:.2f}–{estimate.ci_high:.2f}], includes 1" in text
    lines = speedup_spread(run.frame, "naive")
    (per_head,) = lines[(lines["impl"] == "per_head") & lines["case_id"].str.contains("n2048")]["speedup_by_repeat"]
    assert "`per_head` ran at " + ", ".join(f"{r:.2f}×" for r in per_head[:2]) + f" and {per_head[2]:.2f}×" in text
    found = calibration_of(load_run(calibration))
    assert f"gave {found.between_process_spread:.1%}".replace("%", " %") in text and found.processes == 5
    (fused,) = [r for r in found.ratios if r["impl"] == "fused" and "n128" in r["case_id"]]
    assert ", ".join(f"{r:.2f}×" for r in fused["by_process"][:4]) in text.replace(" and ", ", ")


def test_the_replicated_masks_picks_quoted_are_advise_on_the_stored_run(tmp_path: Path) -> None:
    (run_dir,) = unpack(["20261127T101318Z-masks"], tmp_path)
    (advice,) = advise([load_run(run_dir)]).runs
    text = " ".join((FINDINGS / "masks.md").read_text().split())
    winners = [pick for pick in advice.answers.picks.values() if pick.verdict == WINNER and pick.estimate is not None]
    quoted = {
        ("fused", "flex", "2.14× [1.62–2.82]"),
        ("flex", "fused", "1.70× [1.25–2.30]"),
        ("flex", "fused", "1.14× [1.04–1.24]"),
        ("fused", "flex", "1.52× [1.43–1.62]"),
        ("fused", "flex", "1.43× [1.18–1.74]"),
        ("fused", "flex", "1.47× [1.22–1.75]"),
    }
    said = {
        (p.impls[0], p.runner_up, f"{p.estimate.ratio:.2f}× [{p.estimate.ci_low:.2f}–{p.estimate.ci_high:.2f}]")
        for p in winners
        if p.estimate is not None
    }
    assert quoted <= said
    for winner, runner_up, lead in quoted - {
        ("fused", "flex", "1.43× [1.18–1.74]"),
        ("fused", "flex", "1.47× [1.22–1.75]"),
    }:
        assert f"`{winner}` wins, {lead} over `{runner_up}`" in text
    assert "`fused` wins, 1.43× [1.18–1.74] / 1.47× [1.22–1.75] over `flex`" in text


EIGHT_DEFAULT_RUNS = [
    "20261127T091136Z-default",
    "20261127T091343Z-default",
    "20261127T091637Z-default",
    "20261127T091927Z-default",
    "20261127T092222Z-default",
    "20261127T100806Z-default",
    "20261127T113344Z-default",
    "20261127T121603Z-default",
]


def lead(pick: Pick, digits: int = 2) -> str:
    """A pick's combined lead as the re-checked pages quote it (``digits`` for the interval's ends)."""
    assert pick.estimate is not None
    estimate = pick.estimate
    return f"{estimate.ratio:.2f}× [{estimate.ci_low:.{digits}f}–{estimate.ci_high:.{digits}f}]"


def test_default_run_md_quotes_advise_and_spread_on_the_eight_stored_replicated_runs(tmp_path: Path) -> None:
    runs = [load_run(path) for path in unpack(EIGHT_DEFAULT_RUNS, tmp_path)]
    largest = [
        next(p for p in advice.answers.picks.values() if p.case.fields["seq_len"] == 2048)
        for advice in advise(runs).runs
    ]
    wins = [p for p in largest if p.verdict == WINNER and p.impls == ("fused",)]
    ties = [p for p in largest if p.verdict == TIED]
    assert (len(wins), len(ties)) == (5, 3)
    text = " ".join((FINDINGS / "default-run.md").read_text().split())
    assert all(lead(p) in text for p in ties)
    low, high = min(p.estimate.ratio for p in wins if p.estimate), max(p.estimate.ratio for p in wins if p.estimate)
    assert f"`fused` wins in 5 of 8, {low:.2f}×" in text and f"to {high:.2f}×" in text
    fused = pd.concat([speedup_spread(run.frame, "naive") for run in runs])
    fused = fused[(fused["impl"] == "fused") & fused["case_id"].str.contains("n2048")]
    ratios = [r for by_process in fused["speedup_by_repeat"] for r in by_process]
    assert len(ratios) == 24
    assert f"`fused` {min(ratios):.2f}–{max(ratios):.2f}×" in text


@pytest.mark.parametrize(
    ("page", "run_id", "key", "digits"),
    [
        ("heads-sweep.md", "20261127T120251Z-heads-sweep", "heads", {1: 2, 8: 2, 16: 2, 32: 2, 64: 2}),
        ("scaling.md", "20261127T120606Z-scaling", "heads", {2: 2, 8: 3, 32: 2}),
        ("shared-qk.md", "20261127T120712Z-shared-qk", "seq_len", {256: 2, 1024: 2}),
    ],
)
def test_the_loaded_replicated_runs_picks_quoted_are_advise_on_the_stored_runs(
    tmp_path: Path, page: str, run_id: str, key: str, digits: dict[int, int]
) -> None:
    (run_dir,) = unpack([run_id], tmp_path)
    (advice,) = advise([load_run(run_dir)]).runs
    picks = {pick.case.fields[key]: pick for pick in advice.answers.picks.values()}
    text = " ".join((FINDINGS / page).read_text().split())
    for value, places in digits.items():
        assert lead(picks[value], places) in text, (page, value, lead(picks[value], places))


def picks_of(run_id: str, into: Path) -> set[tuple[str, str]]:
    """Every pick ``advise`` makes on a stored run, as (verdict, "ratio× [low–high]") the way the pages quote it."""
    (run_dir,) = unpack([run_id], into)
    (advice,) = advise([load_run(run_dir)]).runs
    return {
        (pick.verdict, f"{pick.estimate.ratio:.2f}× [{pick.estimate.ci_low:.2f}–{pick.estimate.ci_high:.2f}]")
        for pick in advice.answers.picks.values()
        if pick.estimate is not None
    }


RECHECKED = [
    (
        "masks.md",
        "20261127T113601Z-masks",
        ["1.84× [1.67–2.03]", "1.62× [1.56–1.69]", "1.22× [1.09–1.37]", "1.43× [1.21–1.68]", "2.14× [1.56–2.94]"],
        ["1.31× [0.85–2.01]"],
    ),
    (
        "decode.md",
        "20261127T105733Z-decode-batch-sweep",
        ["1.44× [1.39–1.49]", "1.82× [1.39–2.38]", "1.58× [1.49–1.66]", "2.63× [2.41–2.86]"],
        ["1.08× [0.96–1.22]", "1.08× [0.97–1.21]"],
    ),
    (
        "decode.md",
        "20261127T121245Z-decode-batch-sweep",
        ["1.10× [1.06–1.14]", "3.38× [1.83–6.23]"],
        ["1.03× [0.17–6.04]", "2.22× [0.39–12.65]"],
    ),
    ("dot-vs-additive.md", "20261127T105703Z-dot-vs-additive", ["1.19× [1.10–1.29]", "1.17× [1.10–1.24]"], []),
    (
        "dot-vs-additive.md",
        "20261127T121449Z-dot-vs-additive",
        ["2.32× [2.11–2.56]"],
        ["1.51× [0.48–4.81]", "1.59× [0.48–5.33]"],
    ),
    (
        "head-dim-reduction.md",
        "20261127T105536Z-head-dim-reduction",
        ["1.89× [1.83–1.94]", "3.63× [3.37–3.90]", "6.74× [5.93–7.65]"],
        ["1.02× [0.99–1.05]"],
    ),
    ("head-dim-reduction.md", "20261127T121530Z-head-dim-reduction", ["7.09× [6.61–7.61]"], ["1.02× [1.01–1.04]"]),
    (
        "train-vs-forward.md",
        "20261127T105817Z-train-vs-forward",
        ["1.23× [1.15–1.32]", "1.12× [1.11–1.14]", "1.38× [1.35–1.41]", "1.15× [1.09–1.20]"],
        [],
    ),
    ("train-vs-forward.md", "20261127T121807Z-train-vs-forward", [], ["3.24× [0.22–46.68]"]),
    ("peers.md", "20261127T110024Z-compiled-peers", ["1.22× [1.08–1.36]", "2.04× [1.97–2.12]"], []),
    ("peers.md", "20261127T105853Z-sdpa-backends", [], ["1.00× [0.90–1.11]"]),
    ("peers.md", "20261127T115244Z-sdpa-backends", [], ["1.05× [0.98–1.13]"]),
    ("peers.md", "20261127T120938Z-compiled-peers", ["1.19× [1.05–1.35]", "1.87× [1.76–1.99]"], []),
]


@pytest.mark.parametrize(("page", "run_id", "wins", "ties"), RECHECKED, ids=[f"{p}:{r}" for p, r, _, _ in RECHECKED])
def test_the_rechecked_picks_a_page_quotes_are_advise_on_its_stored_run(
    tmp_path: Path, page: str, run_id: str, wins: list[str], ties: list[str]
) -> None:
    said = picks_of(run_id, tmp_path)
    text = " ".join((FINDINGS / page).read_text().split())
    for verdict, figures in ((WINNER, wins), (TIED, ties)):
        for figure in figures:
            assert (verdict, figure) in said, f"{run_id}: advise has no {verdict} at {figure}"
            assert figure in text, f"{page} does not quote {figure}"


POOLED_TABLES = [
    ("decode.md", "20261127T105733Z-decode-batch-sweep", "naive"),
    ("dot-vs-additive.md", "20261127T105703Z-dot-vs-additive", "naive"),
    ("head-dim-reduction.md", "20261127T105536Z-head-dim-reduction", "fused"),
    ("train-vs-forward.md", "20261127T105817Z-train-vs-forward", "naive"),
]


def table(page: Path, marker: str) -> list[list[str]]:
    """The cells of the first Markdown table of ``page`` whose header holds ``marker``, header and separator
    included."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    block = itertools.takewhile(lambda line: line.startswith("|"), lines[start:])
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in block]


def milliseconds(value: float) -> str:
    """A latency as the pooled tables write it: three decimals below 10 ms, two above."""
    return f"{value:.3f}" if value < 10 else f"{value:.2f}"


@pytest.mark.parametrize(("page", "run_id", "baseline"), POOLED_TABLES, ids=[p for p, _, _ in POOLED_TABLES])
def test_a_pages_pooled_table_is_compares_csv_on_its_stored_run(
    tmp_path: Path, page: str, run_id: str, baseline: str
) -> None:
    """The table whose header has "median ms | processes' medians ms" is the CSV of ``mhabench compare RUN
    --baseline B --output x.csv`` (pooled over the run's processes), row for row, rounded once."""
    (run_dir,) = unpack([run_id], tmp_path)
    pooled = pooled_rows(speedups(load_run(run_dir), baseline).rows)
    header, _, *rows = table(FINDINGS / page, "| median ms | processes' medians ms |")
    columns = [header.index(name) for name in ("impl", "median ms", "processes' medians ms", "speedup")]
    expected = [
        (
            row["impl"],
            milliseconds(row["latency_ms"]),
            f"{milliseconds(row['latency_process_min_ms'])}–{milliseconds(row['latency_process_max_ms'])}",
            f"{row['speedup']:.2f}×",
        )
        for _, row in pooled.iterrows()
    ]
    assert [tuple(row[i] for i in columns) for row in rows] == expected
