"""The "Claims" section of ``mhabench report`` for a run folder that holds a claims.csv (or only probes.csv).

``mhabench report`` passes these blocks to :func:`mhabench.views.report.sections.build` as the sections
shown first: the report itself knows nothing of probes."""

from __future__ import annotations

import csv
from pathlib import Path

from mhabench.errors import ResultsCorruptError
from mhabench.probe.claims import CLAIM_COLUMNS
from mhabench.probe.run import CLAIMS_NAME, PROBES_NAME
from mhabench.probe.table import verdict_counts, verdict_table
from mhabench.views.report.blocks import Block, Heading, Paragraph


def read_claims(run_dir: Path) -> list[dict[str, str]]:
    """claims.csv as written; a file without the claim columns is a damaged run, not a crash."""
    path = run_dir / CLAIMS_NAME
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in CLAIM_COLUMNS if c not in (reader.fieldnames or [])]
            records = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ResultsCorruptError(f"{path}: cannot read the claims ({exc})") from None
    if missing:
        raise ResultsCorruptError(f"{path}: not mhabench claims (missing columns {missing})")
    return records


def claims_blocks(run_dir: Path) -> list[Block]:
    """Heading, verdict counts and the verdict table; nothing when the run has no claims.csv.

    A probe run stopped before its end has probes.csv but no claims.csv (the claims are evaluated once
    every case is measured): the section says so rather than vanishing."""
    if not (run_dir / CLAIMS_NAME).is_file():
        if not (run_dir / PROBES_NAME).is_file():
            return []
        note = (
            f"No {CLAIMS_NAME}: the probe run stopped before its claims were evaluated; {PROBES_NAME} holds "
            "the statistics of the cases it finished."
        )
        return [Heading("Claims"), Paragraph(note)]
    records = read_claims(run_dir)
    explanation = (
        "PASS / FAIL: measured against the theory within the tolerance; NO-GUARANTEE: the theory's premise "
        "does not hold for this case (the note says why); INFO: no theoretical value; UNTESTABLE: needs training."
    )
    return [
        Heading("Claims"),
        Paragraph(f"{verdict_counts(records)}. {explanation}"),
        verdict_table(records, "Claims"),
    ]
