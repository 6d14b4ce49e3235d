"""``mhabench compare``'s output: the comparison as a table for the terminal (rich), CSV, JSON and Markdown.

:func:`comparison_table` is the one table of a :class:`mhabench.analysis.compare.Comparison`: speedups
over the baseline for one run, ratio, CI, Holm-corrected p-value and verdict for two. Every output
renders it, so the terminal and the ``--output`` file never disagree.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
from rich.table import Table
from rich.text import Text

from mhabench.analysis import stats
from mhabench.analysis.compare import Comparison
from mhabench.analysis.speedup import DEFAULT_BASELINE
from mhabench.analysis.spread import repeat_count
from mhabench.analysis.throughput import USEFUL_INTENSITY, throughput
from mhabench.analysis.verdict import Change, Unjudged
from mhabench.errors import InputError
from mhabench.results.columns import IMPL, LATENCY_MS, REPEAT, STATUS
from mhabench.results.schema import RowStatus
from mhabench.views import machine, table
from mhabench.views.pooled import DROPPABLE as POOLED_DROPPABLE
from mhabench.views.pooled import pooled_table, pooled_title
from mhabench.views.summary import method_phrase, status_text
from mhabench.views.table import TableModel, format_number

OUTPUT_SUFFIXES = (".csv", ".json", ".md")


# --- the terminal ------------------------------------------------------------------------------


def differences_text(comparison: Comparison) -> Text | None:
    """What differs between the two manifests, shown above the table (None when nothing does)."""
    if not comparison.differences:
        return None
    text = Text("Runs differ in:\n", style="bold yellow")
    for difference in comparison.differences:
        text.append(f"  {difference.field}: ", style="yellow")
        text.append(f"{difference.base} → {difference.candidate}\n")
    return text


def compare_table(comparison: Comparison, width: int | None = None) -> Table:
    """The comparison as a rich table; verdicts (two runs) or winners and failures (one run) in colour. A
    replicated run's pooled table loses the columns a ``width`` terminal cannot show, as the run summary does."""
    model = comparison_table(comparison)
    if width and comparison.candidate_id is None and comparison.replicated:
        model = table.fit_columns(model, width, POOLED_DROPPABLE)
    return table.to_rich(model)


# --- the table ---------------------------------------------------------------------------------


def comparison_table(comparison: Comparison) -> TableModel:
    """The comparison as the shared table model (terminal, Markdown, CSV and JSON render it)."""
    if comparison.candidate_id is None and comparison.replicated:  # one row per (case, impl), not per process
        title = f"{comparison.base_id}: speedup vs {comparison.baseline}, " + pooled_title(comparison.rows)
        return pooled_table(comparison.rows, comparison.baseline or DEFAULT_BASELINE, title)
    table_of = _speedup_table if comparison.candidate_id is None else _runs_table
    return table_of(comparison)


def _ci(value: Any, low: Any, high: Any) -> str:
    """``[low, high]``; ``n/a`` where the estimate exists but too few samples leave its interval undefined."""
    if math.isfinite(float(low)):
        return f"[{format_number(low, '.3f')}, {format_number(high, '.3f')}]"
    return "n/a" if math.isfinite(float(value)) else "-"


VERDICT_STYLES: dict[str, str] = {
    Change.UNCLEAR: "maybe",
    Unjudged.CANNOT_JUDGE: "maybe",
    Unjudged.ONLY_IN_BASE: "only",
    Unjudged.ONLY_IN_CANDIDATE: "only",
    Unjudged.NOT_COMPARED: "failed",
}
"""The table style of a verdict that is not its own word (``faster``, ``slower``, ``same`` are styles too)."""


def _verdict_style(verdict: str) -> str:
    return VERDICT_STYLES.get(verdict, verdict)


PICK_MARKS = {"winner": "★", "tie": "="}
"""The run's answer in the one-run table: ★ on a winner only, = on each member of a tie."""


def _speedup_table(comparison: Comparison) -> TableModel:
    """One run: speedups over the baseline, with the method; a ``rep`` column for a ``--repeat N`` run."""
    frame = comparison.rows
    with_repeats = repeat_count(frame) > 1
    headers = [
        "case",
        "impl",
        *(["rep"] if with_repeats else []),
        "median ms",
        f"speedup vs {comparison.baseline}",
        "95% CI",
        "method",
        "mem ratio",
        "FLOP/B",
        "pick",
        "status",
    ]
    intensity = throughput(frame)[USEFUL_INTENSITY]  # the results table's FLOP/B: useful FLOPs over minimal bytes
    cells = [
        [
            r["case"],
            r[IMPL],
            *([str(r[REPEAT])] if with_repeats else []),
            format_number(r[LATENCY_MS], ".3f"),
            format_number(r["speedup"], ".2f", "×"),
            _ci(r["speedup"], r["speedup_ci_low"], r["speedup_ci_high"]),
            r["speedup_method"] or "-",
            format_number(r["memory_ratio"], ".2f", "×"),
            format_number(intensity[index], ".1f"),
            PICK_MARKS.get(r.get("pick", ""), ""),
            status_text(r),
        ]
        for index, r in frame.iterrows()
    ]
    styles = [
        "failed" if r[STATUS] != RowStatus.OK else "winner" if r.get("pick") == "winner" else ""
        for _, r in frame.iterrows()
    ]
    phrase = method_phrase(frame.get("speedup_method", []))
    title = f"{comparison.base_id}: speedup vs {comparison.baseline} ({phrase}, 95% bootstrap CI)"
    return TableModel(title, headers, cells, _numeric(headers), styles, list(frame["case"]), frame)


def _runs_table(comparison: Comparison) -> TableModel:
    """Two runs: candidate/base ratio, CI, Holm-corrected p-value and verdict per matched row."""
    frame = comparison.rows
    with_repeats = repeat_count(frame) > 1
    headers = [
        "case",
        "impl",
        *(["rep"] if with_repeats else []),
        "base ms",
        "cand ms",
        "ratio",
        "95% CI",
        "p (Holm)",
        "verdict",
        "counted work",
        "note",
    ]
    cells = [
        [
            r["case"],
            r[IMPL],
            *([str(r[REPEAT])] if with_repeats else []),
            format_number(r["base_ms"], ".3f"),
            format_number(r["candidate_ms"], ".3f"),
            format_number(r["ratio"], ".3f"),
            _ci(r["ratio"], r["ci_low"], r["ci_high"]),
            format_number(r["p_holm"], ".2g"),
            r["verdict"],
            machine.work_cell(r),
            machine.row_note(r, comparison.machine),
        ]
        for _, r in frame.iterrows()
    ]
    styles = [_verdict_style(str(r["verdict"])) for _, r in frame.iterrows()]
    measure = "candidate/base, paired in the same rounds" if comparison.same_rounds else "candidate/base median"
    title = (
        f"{comparison.base_id} → {comparison.candidate_id}: {measure} "
        f"(threshold {comparison.threshold:.1%}: verdict by the whole 95% CI; p informative)"
    )
    return TableModel(title, headers, cells, _numeric(headers), styles, list(frame["case"]), _records(frame))


def _records(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows as CSV and JSON hold them: each row's notes in words (``note``) and by code (``note_codes``,
    ``;``-separated; docs/compare-and-report.md), where the comparison holds them typed."""
    if "notes" not in frame:
        return frame
    at = list(frame.columns).index("notes")
    out = frame.drop(columns="notes")
    out.insert(at, "note", [machine.notes_text(notes) for notes in frame["notes"]])
    out.insert(at + 1, "note_codes", [";".join(note.code.value for note in notes) for notes in frame["notes"]])
    return out


SUMMARY_ORDER: tuple[Change | Unjudged, ...] = (
    Change.FASTER,
    Change.SLOWER,
    Change.SAME,
    Change.UNCLEAR,
    Unjudged.CANNOT_JUDGE,
    Unjudged.NOT_COMPARED,
    Unjudged.ONLY_IN_BASE,
    Unjudged.ONLY_IN_CANDIDATE,
)


def summary_line(comparison: Comparison) -> str | None:
    """Two runs in one line: how many rows went which way, and a run-wide shift when the data show one."""
    summary = comparison.summary
    if summary is None:
        return None
    counts = ", ".join(f"{summary.counts[v]} {v.value}" for v in SUMMARY_ORDER if summary.counts.get(v))
    line = f"Summary: {counts} (of {sum(summary.counts.values())} rows)"
    if summary.shift is None or summary.shift_ci is None:
        return line + "; too few compared rows to judge a run-wide shift."
    low, high = summary.shift_ci
    shift = f"geometric mean ratio {summary.shift:.3f} [{low:.3f}, {high:.3f}]"
    if summary.shift_verdict in (Change.SLOWER, Change.FASTER):
        percent = abs(summary.shift - 1) * 100 if summary.shift > 1 else (1 / summary.shift - 1) * 100
        return f"{line}; run-wide shift: the candidate is {percent:.0f}% {summary.shift_verdict.value} ({shift})."
    if summary.shift_verdict is Change.SAME:
        return f"{line}; no run-wide shift ({shift}, within the threshold)."
    return f"{line}; a run-wide shift cannot be ruled in or out ({shift})."


def _numeric(headers: list[str]) -> list[bool]:
    return [
        h not in ("case", "impl", "rep", "method", "verdict", "counted work", "note", "status", "pick") for h in headers
    ]


# --- output files ------------------------------------------------------------------------------


def check_output_path(path: Path) -> None:
    """Refuse an unknown ``--output`` extension before any work is done."""
    if path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise InputError(f"--output: {path}: unknown extension {path.suffix!r} (use {', '.join(OUTPUT_SUFFIXES)})")


def write_output(comparison: Comparison, path: Path) -> None:
    """Write the comparison as CSV, JSON or Markdown, chosen by the file's extension."""
    check_output_path(path)
    suffix = path.suffix.lower()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".csv":
            path.write_text(table.to_csv(comparison_table(comparison)), encoding="utf-8")
        elif suffix == ".json":
            path.write_text(json.dumps(_as_json(comparison), indent=2, default=str) + "\n", encoding="utf-8")
        else:
            path.write_text(as_markdown(comparison), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--output: {path}: cannot write ({exc.strerror or exc})") from None


def _as_json(comparison: Comparison) -> dict[str, Any]:
    records = table.to_json_records(comparison_table(comparison))
    return {
        "base": comparison.base_id,
        "candidate": comparison.candidate_id,
        "baseline": comparison.baseline,
        "threshold": comparison.threshold,
        "alpha": stats.ALPHA,
        "confidence_level": stats.CONFIDENCE_LEVEL,
        "differences": [dataclasses.asdict(d) for d in comparison.differences],
        "summary": summary_line(comparison),
        "machine": machine.machine_line(comparison),
        "counted_work": machine.work_line(comparison),
        "rows": records,
    }


def as_markdown(comparison: Comparison) -> str:
    """``--output x.md``: a title, the threshold, the manifest differences, then the table."""
    if comparison.candidate_id is None:
        title = f"# mhabench compare: {comparison.base_id} (baseline {comparison.baseline})"
    else:
        title = f"# mhabench compare: {comparison.base_id} → {comparison.candidate_id}"
    parts = [title, ""]
    if comparison.threshold is not None:
        parts += [
            f"Threshold {comparison.threshold:.1%}: a row is slower or faster when its whole 95% CI lies past it, "
            f"the same when the CI lies inside it, ~ otherwise; p (Holm, α = {stats.ALPHA}) is informative.",
            "",
        ]
    if comparison.differences:
        parts += ["Manifest differences:", ""]
        parts += [f"- {d.field}: {d.base} → {d.candidate}" for d in comparison.differences] + [""]
    lines = [line for line in (summary_line(comparison), *machine_lines(comparison)) if line]
    return "\n".join([*parts, table.to_markdown(comparison_table(comparison)), *(["", *lines] if lines else []), ""])


def machine_lines(comparison: Comparison) -> list[str]:
    """Two runs: the lines on the machine's movement and the counted work, under the summary."""
    if comparison.candidate_id is None:
        return []
    return [line for line in (machine.machine_line(comparison), machine.work_line(comparison)) if line]
