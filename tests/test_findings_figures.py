"""Every timed ratio a findings page quotes is one `mhabench advise` or `compare` prints on the page's stored runs.

Issue 26's replay promise, checked for every page whose runs are stored: each figure written as
``1.23× [1.10–1.40]`` (a ratio with its 95 % interval) must be reproduced by one of the commands a reader can
run on the folders under docs/findings/runs: ``advise`` on one run or on the runs of one config together,
``compare RUN --baseline IMPL`` for any implementation of the run (pooled across processes for a replicated
run), or ``compare A B`` between consecutive runs of one config. A figure copied from a run that was not kept,
or edited by hand, fails here.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from test_findings_runs import FINDINGS, RUNS, UNSTORED_PAGES, cited, unpack

from mhabench.analysis import compare as compare_mod
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.pooled_rows import pooled_rows
from mhabench.results.store import Run, load_run
from mhabench.views.advice import to_markdown

FIGURE = re.compile(r"(\d+\.\d\d)× \[(\d+\.\d\d)–(\d+\.\d\d)\]")
"""A ratio with its interval as advise writes it and as the pages quote it."""


def figure(ratio: float, low: float, high: float) -> tuple[str, str, str] | None:
    """A ratio and interval in the pages' two-decimal spelling (None where the interval is missing)."""
    if any(not isinstance(x, float | int) or math.isnan(x) for x in (ratio, low, high)):
        return None
    return f"{ratio:.2f}", f"{low:.2f}", f"{high:.2f}"


def pages() -> list[str]:
    """Pages whose runs are stored and that cite at least one."""
    return sorted(
        page.name for page in FINDINGS.glob("*.md") if page.name not in UNSTORED_PAGES and stored_citations(page)
    )


def stored_citations(page: Path) -> list[str]:
    return sorted(run_id for run_id in cited(page) if (RUNS / f"{run_id}.tar.xz").exists())


def by_config(runs: list[Run]) -> list[list[Run]]:
    """The runs grouped by config (the part of the run id after its timestamp), in run-id order."""
    key = lambda run: run.run_id.split("Z-", 1)[1]  # noqa: E731
    return [list(group) for _, group in itertools.groupby(sorted(runs, key=key), key=key)]


def advise_figures(runs: list[Run]) -> Iterator[tuple[str, str, str]]:
    yield from FIGURE.findall(to_markdown(advise(runs)))


def speedup_figures(run: Run) -> Iterator[tuple[str, str, str]]:
    """``compare RUN --baseline X``'s speedups for every X: per process, and pooled across them for a replicated
    run (what its table and ``--output`` print)."""
    for baseline in sorted(set(run.frame["impl"])):
        rows = compare_mod.speedups(run, baseline).rows
        if run.manifest.replicated:
            rows = pd.concat([rows, pooled_rows(rows)], ignore_index=True)
        for ratio, low, high in zip(rows["speedup"], rows["speedup_ci_low"], rows["speedup_ci_high"], strict=True):
            if (found := figure(ratio, low, high)) is not None:
                yield found


def change_figures(base: Run, candidate: Run) -> Iterator[tuple[str, str, str]]:
    """``compare A B``'s ratios; none where the two share no case (a config whose cases changed under its name, as
    the embedded default's did)."""
    spread = compare_mod.machine_spread([base, candidate])
    try:
        rows = compare_mod.compare_runs(base, candidate, 0.05, between_process_spread=spread).rows
    except compare_mod.NoCommonRowsError:
        return
    for ratio, low, high in zip(rows["ratio"], rows["ci_low"], rows["ci_high"], strict=True):
        if (found := figure(ratio, low, high)) is not None:
            yield found


class StoredRuns:
    """The stored runs unpacked and loaded once for the module, with each run's own figures (advise on it alone,
    compare against every baseline): pages cite many of the same runs, and one run's figures do not depend on the
    page that cites it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.runs: dict[str, Run] = {}
        self.own: dict[str, frozenset[tuple[str, str, str]]] = {}

    def run(self, run_id: str) -> Run:
        if run_id not in self.runs:
            (path,) = unpack([run_id], self.folder)
            self.runs[run_id] = load_run(path)
        return self.runs[run_id]

    def figures(self, run_id: str) -> frozenset[tuple[str, str, str]]:
        if run_id not in self.own:
            run = self.run(run_id)
            self.own[run_id] = frozenset({*advise_figures([run]), *speedup_figures(run)})
        return self.own[run_id]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> StoredRuns:
    return StoredRuns(tmp_path_factory.mktemp("stored-runs"))


def reproduced(run_ids: tuple[str, ...], stored: StoredRuns) -> frozenset[tuple[str, str, str]]:
    """Every ratio-with-interval advise and compare print on these stored runs."""
    found: set[tuple[str, str, str]] = set()
    for run_id in run_ids:
        found |= stored.figures(run_id)
    for group in by_config([stored.run(run_id) for run_id in run_ids]):
        if len(group) > 1:
            found |= set(advise_figures(group))
            for base, candidate in itertools.pairwise(group):
                found |= set(change_figures(base, candidate))
    return frozenset(found)


@pytest.mark.parametrize("page", pages())
def test_every_ratio_a_page_quotes_is_printed_by_advise_or_compare_on_its_stored_runs(
    page: str, stored: StoredRuns
) -> None:
    quoted = set(FIGURE.findall((FINDINGS / page).read_text()))
    if not quoted:
        pytest.skip(f"{page} quotes no ratio with an interval")
    found = reproduced(tuple(stored_citations(FINDINGS / page)), stored)
    missing = sorted(quoted - found)
    spelled = ", ".join(f"{r}× [{lo}–{hi}]" for r, lo, hi in missing[:12])
    assert not missing, f"{page}: {len(missing)} of {len(quoted)} quoted ratios no command reproduces: {spelled}"


def test_the_figure_pattern_reads_advise_spelling() -> None:
    assert FIGURE.findall("`fused` wins, 1.61× [1.26–2.59] over `naive`") == [("1.61", "1.26", "2.59")]
    assert figure(1.0, math.nan, 2.0) is None
