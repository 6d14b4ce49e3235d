"""Where a run's answer meets its folder: the record written at the end, the calibration read back.

The calibration and notes a later reading takes come from the folder (or from ``--calibration FILE``), never from
this machine's cache.

:mod:`mhabench.analysis.answer` computes the record without I/O; :mod:`mhabench.results.answers` reads and writes
the file. This module decides which calibration an answer is judged against:

- when a run ends, the calibration ``mhabench calibrate`` measured on its machine (if any) is recorded with it;
- when a folder is read again, the one it recorded, or the one given with ``--calibration FILE``;
- a folder written before answers.json existed is answered again, with the note ``recomputed``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from mhabench.analysis.advice.advise import Advice, advise
from mhabench.analysis.answer import CalibrationUsed, Reason
from mhabench.analysis.explain.explain import citations
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.statement import Question
from mhabench.results.answers import (
    ANSWERS_NAME,
    read_answers,
    read_calibration_file,
    recorded_calibration,
    write_answers,
)
from mhabench.results.calibration import load_calibration
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.store import Run

RECOMPUTED = "recomputed"
"""The note of a record computed again for a folder that keeps none."""


def advise_folders(
    runs: Sequence[Run],
    question: Question | None = None,
    calibration_file: Path | None = None,
    baseline: str = DEFAULT_BASELINE,
) -> Advice:
    """Advice on runs read from their folders: each judged against ``calibration_file`` when given, else the
    calibration its folder recorded (none: none)."""
    given = CalibrationUsed.of(read_calibration_file(calibration_file), "file") if calibration_file else None
    calibrations, notes = [], []
    for run in runs:
        kept = read_answers(run.path)
        calibrations.append(given or CalibrationUsed.from_record(recorded_calibration(kept)))
        notes.append(() if kept is not None else (Reason(RECOMPUTED, {"missing": ANSWERS_NAME}, run.run_id),))
    return with_citations(advise(runs, question, calibrations, notes, baseline), runs)


def answer_at_end(run: Run, baseline: str = DEFAULT_BASELINE) -> Advice:
    """A finished run's advice, judged against its machine's calibration as it stands now, and its record written
    into the folder (answers.json) with that calibration, so a later reading needs no cache."""
    found = load_calibration(Fingerprint.of(run.manifest.environment or {}))
    calibration = CalibrationUsed.of(found, "recorded") if found is not None else None
    advice = with_citations(advise([run], None, [calibration], baseline=baseline), [run])
    write_answers(run.path, advice.runs[0].record.record())
    return advice


def with_citations(advice: Advice, runs: Sequence[Run]) -> Advice:
    """``advice`` with, under each case, what ``mhabench explain`` finds of each slower row (the stage and its
    departure): explain reads each run's answer record, so advice and explain never call each other."""
    cited = [
        dataclasses.replace(one, statements=(*one.statements, *citations(run, one.record)))
        for one, run in zip(advice.runs, runs, strict=True)
    ]
    return dataclasses.replace(advice, runs=tuple(cited))
