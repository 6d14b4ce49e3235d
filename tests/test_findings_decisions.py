"""Every decision of the stored findings runs replays unchanged: each case's verdict and picked (or tied)
implementations and each crossover, as the answer record gives them, against the decisions recorded in
``tests/data/findings_decisions/decisions.json``.

The file was written from the advise of the code before the answer record existed; a change that means to alter a
decision rewrites it (``MHABENCH_REGOLD=1``) and lists the change in docs/advise.md ("Decisions changed on purpose").
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

from mhabench.analysis.answer import Verdict, answer_run
from mhabench.results.store import Run, load_run

RUNS = Path(__file__).resolve().parents[1] / "docs" / "findings" / "runs"
DECISIONS = Path(__file__).parent / "data" / "findings_decisions" / "decisions.json"
REGOLD = os.environ.get("MHABENCH_REGOLD") == "1"
WORDS = {
    Verdict.WINNER: "winner",
    Verdict.TIE: "tied",
    Verdict.CANNOT_TELL: "cannot tell",
    Verdict.ONLY: "only",
    Verdict.NOTHING_RAN: "nothing ran",
}
"""The recorded file's words for each verdict (the pick's words before the record had codes)."""


def decisions(run: Run) -> dict:
    """One run's decisions as the file records them."""
    record = answer_run(run)
    cases = {
        case.case_id: [WORDS[case.verdict], sorted(case.tied or ([case.fastest] if case.fastest else []))]
        for case in record.cases
    }
    crossovers = [
        [
            one.group,
            one.axis,
            {k: str(v) for k, v in one.fixed.items()},
            [[str(x) for x in s] for s in one.changes_between],
        ]
        for one in record.crossovers
    ]
    return {"cases": cases, "crossovers": crossovers}


def test_every_stored_findings_decision_replays(tmp_path: Path) -> None:
    recorded = json.loads(DECISIONS.read_text())
    found = {}
    for archive in sorted(RUNS.glob("*.tar.xz")):
        run_id = archive.name.removesuffix(".tar.xz")
        with tarfile.open(archive) as opened:
            opened.extractall(tmp_path, filter="data")
        run = load_run(tmp_path / run_id)
        if not run.frame.empty:
            found[run_id] = decisions(run)
    if REGOLD:
        DECISIONS.write_text(json.dumps(found, indent=1, sort_keys=True))
    assert set(found) == set(recorded), "a stored run was added or removed: regold and list it"
    changed = [
        f"{run_id} {case}: {recorded[run_id]['cases'].get(case)} -> {now}"
        for run_id in found
        for case, now in found[run_id]["cases"].items()
        if recorded[run_id]["cases"].get(case) != now
    ]
    assert not changed, "decisions changed:\n" + "\n".join(changed)
    moved = [run_id for run_id in found if found[run_id]["crossovers"] != recorded[run_id]["crossovers"]]
    assert not moved, f"crossovers changed in {moved}"
    counts = {WORDS[v]: 0 for v in Verdict}
    for run in found.values():
        for verdict, _ in run["cases"].values():
            counts[verdict] += 1
    assert counts["winner"] and counts["tied"] and counts["cannot tell"]  # every kind of decision is replayed
