"""``compare``'s words about a row, the machine and the counted work: a row's notes and the lines under the table.

The codes and figures come from :mod:`mhabench.analysis.verdict` (a row's :class:`RowNote`),
:mod:`mhabench.analysis.machine_drift` and :mod:`mhabench.analysis.work_change`; this module only writes them out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.compare import Comparison
from mhabench.analysis.machine_drift import MachineMove, RowMachine
from mhabench.analysis.verdict import Note, RowNote
from mhabench.analysis.work_change import WorkChange

NOTES: dict[RowNote, str] = {
    RowNote.NOT_OK: "{side} {status}: {error}",
    RowNote.NO_TEST: "fewer than 2 samples: no test, no interval",
    RowNote.NO_INTERVAL: "fewer than {needs} samples: no interval",
    RowNote.WITHIN_SPREAD: "within this machine's between-process spread ({spread:.0%})",
    RowNote.ACROSS_PROCESSES: "across {base} vs {candidate} processes",
    RowNote.PROCESSES_OK: "{side}: {ok} of {processes} processes ok",
    RowNote.NO_SHARED_PROCESS: "ok in no process ({base_rows} base, {candidate_rows} candidate rows)",
    RowNote.SAME_ROUNDS: "same rounds, across {processes} of {of} processes",
}
"""A compared row's note per code, filled from the note's numbers."""

ROW_NOTES: dict[str, str] = {
    RowMachine.MOVED_WITHIN: "the machine moved {within:.0%} within a run",
    RowMachine.MOVED_BETWEEN: "the machine moved {between:+.0%} between the runs",
}
"""A row's note per machine state, filled from the comparison's :class:`MachineMove`."""

COLUMN_NAMES = {
    "measured_flops": "FLOPs",
    "measured_bytes": "bytes",
    "ops_per_call": "ops/call",
    "tensor_flops": "tensor FLOPs",
    "fp32_flops": "fp32 FLOPs",
    "kernels_per_call": "kernels/call",
}


def row_note(row: Mapping[str, Any], move: MachineMove | None) -> str:
    """Every note of a compared row, then what the machine's movement did to it, in one cell ("" when none)."""
    return "; ".join(part for part in (notes_text(row.get("notes") or ()), machine_note(row, move)) if part)


def notes_text(notes: Sequence[Note]) -> str:
    """A row's notes in words, ``; ``-separated ("" for none)."""
    return "; ".join(_note(note) for note in notes)


def _note(note: Note) -> str:
    numbers = dict(note.numbers)
    if note.code is RowNote.ACROSS_PROCESSES:
        base, candidate = (
            f"{numbers[f'{side}_ok']} of {numbers[f'{side}_all']}"
            if numbers[f"{side}_ok"] < numbers[f"{side}_all"]
            else str(numbers[f"{side}_ok"])
            for side in ("base", "candidate")
        )
        text = NOTES[note.code].format(base=base, candidate=candidate)
        return text + (": too few for an interval" if numbers["too_few"] else "")
    if "error" in numbers:
        numbers["error"] = numbers["error"] or "no samples"
    text = NOTES[note.code].format(**numbers)
    if note.code is RowNote.PROCESSES_OK and "status" in numbers:
        text += f" ({numbers['status']}: {numbers['error']})"
    return text


def machine_note(row: Mapping[str, Any], move: MachineMove | None) -> str:
    """Why the machine's movement left this row unjudged ("" when it did not)."""
    state = str(row.get("machine") or "")
    if move is None or state not in ROW_NOTES:
        return ""
    return ROW_NOTES[state].format(within=move.within, between=move.factor - 1)


def work_cell(row: Mapping[str, Any]) -> str:
    """Every counted column that changed, exactly: ``FLOPs 100663296 → 134217728 (+33.3%)``; "" when none did."""
    found: Sequence[WorkChange] = row.get("work_changes") or []
    return "; ".join(_work_change(change) for change in found)


def _work_change(change: WorkChange) -> str:
    relative = "new" if math.isinf(change.relative) else f"{change.relative:+.1%}"
    name = COLUMN_NAMES.get(change.column, change.column)
    return f"{name} {change.base:.0f} → {change.candidate:.0f} ({relative})"


def machine_line(comparison: Comparison) -> str | None:
    """How far the machine moved between the runs and within them, from their reference timings, and what that did
    to the rows."""
    move = comparison.machine
    if move is None:
        return None
    if move.base is None or move.candidate is None:
        missing = [name for name, side in (("base", move.base), ("candidate", move.candidate)) if side is None]
        return f"Machine: not watched ({' and '.join(missing)} recorded no reference timings); rows judged as they are."
    workload = move.base.workload or "reference workload"
    line = (
        f"Machine: the {workload} took {move.base.level_ms:.3g} ms in the base and {move.candidate.level_ms:.3g} ms "
        f"in the candidate ({move.factor - 1:+.0%}); within a run it moved up to {move.within:.0%}"
    )
    if not move.moved:
        return f"{line}: steady (threshold {move.threshold:.0%}), rows judged as they are."
    where = " and ".join(
        name for name, moved in (("between the runs", move.moved_between), ("within a run", move.moved_within)) if moved
    )
    return (
        f"{line}: past the threshold ({move.threshold:.0%}) {where}; {len(comparison.unjudged)} timed row(s) cannot "
        "be judged (the reference does not tell how far a row moved with it; mhabench ab times both versions in the "
        "same rounds)."
    )


def work_line(comparison: Comparison) -> str | None:
    """How many rows counted different work, and how many rose past the threshold (None when none changed)."""
    if "work_changes" not in comparison.rows:
        return None
    changed = int(comparison.rows["work_changes"].map(bool).sum())
    if not changed:
        return "Counted work: unchanged in every row counted in both runs."
    rose = len(comparison.work_rises)
    threshold = comparison.threshold or 0.0
    return f"Counted work: changed in {changed} row(s), rose past the threshold ({threshold:.0%}) in {rose}."
