"""What a run's report says, top to bottom: the advice (``mhabench advise``'s answer), summary, plots,
per-scenario tables, model disagreements, run-to-run spread, failures, environment, configuration.

The speedups over the baseline (a bootstrap per case) are computed once per report and shared by the
plots, the scenario tables and the spread section. Sections another layer owns (a probe run's claims)
come in through :func:`build`'s ``first``: this module knows nothing of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd
import yaml

from mhabench.analysis.answer import RunAnswer
from mhabench.analysis.case_label import case_label
from mhabench.analysis.speedup import DEFAULT_BASELINE, speedup_rows
from mhabench.analysis.spread import repeat_count, spread_of
from mhabench.analysis.throughput import EXECUTED_OVER_USEFUL
from mhabench.answers_on_disk import advise_folders
from mhabench.results.cells import flag
from mhabench.results.columns import (
    ARITHMETIC_INTENSITY,
    BYTES_MOVED,
    CAPPED,
    CASE_ID,
    CAUSAL,
    ERROR,
    FLOPS,
    IMPL,
    LATENCY_MS,
    MEASURED_BYTES,
    MEASURED_FLOPS,
    MEASURED_INTENSITY,
    MODEL_DISAGREEMENT,
    MODEL_DISAGREES,
    NOISY,
    SAMPLE_COUNT,
    SCENARIO,
    SKIPS_MASKED_WORK,
    STATUS,
    label,
)
from mhabench.results.schema import MIN_SPREAD_SAMPLES, RowStatus
from mhabench.results.store import Run
from mhabench.views.advice import report_blocks
from mhabench.views.plots import all_plots
from mhabench.views.pooled import PER_PROCESS_ROWS, pooled_note, pooled_table
from mhabench.views.report.blocks import Block, Code, Heading, Paragraph, skipped_plot
from mhabench.views.report.energy import energy_blocks
from mhabench.views.report.hardware_gaps import hardware_gap_blocks
from mhabench.views.report.kernels import kernel_blocks
from mhabench.views.run_notes import drift_lines
from mhabench.views.stage_plot import stage_blocks
from mhabench.views.summary import results_table
from mhabench.views.table import LABELS as THROUGHPUT_LABELS
from mhabench.views.table import TableModel, format_number, human_bytes, human_count


def build(
    run: Run,
    baseline: str = DEFAULT_BASELINE,
    first: Sequence[Block] = (),
    kernels: int = 0,
    replicate_rows: bool = False,
) -> list[Block]:
    """The whole report: the title, then ``first`` (a probe run's claims, which the caller reads), then
    the sections below. A run without rows (a probe run) keeps only the environment and the config.
    ``kernels``: the longest kernels of each profiled row to list (0: no such section). A replicated run's
    result tables are pooled across its processes; ``replicate_rows`` adds each process's rows after them. The
    advice and the tables read one answer (a row is styled as the pick only where it says winner)."""
    advice = advise_folders([run], baseline=baseline) if len(run.rows) else None
    return [
        Heading(f"mhabench report: {run.run_id}", 1),
        *first,
        *(report_blocks(advice) if advice else []),
        *(
            _result_blocks(run, advice.runs[0].record, baseline, replicate_rows)
            if advice
            else [Paragraph(_no_rows_sentence(run))]
        ),
        *(stage_blocks(run) if len(run.rows) else []),
        *kernel_blocks(run, kernels),
        *(energy_blocks(run) if len(run.rows) else []),
        Heading("Environment"),
        _environment_table(run),
        *_roofline_table(run),
        Heading("Configuration"),
        Paragraph("Command: " + " ".join(str(a) for a in run.manifest.command)),
        Code(yaml.safe_dump(run.manifest.config or {}, sort_keys=False).rstrip()),
    ]


def _result_blocks(run: Run, record: RunAnswer, baseline: str, replicate_rows: bool = False) -> list[Block]:
    rows = run.frame
    speedups = record.with_picks(speedup_rows(rows, baseline))
    if run.manifest.replicated:
        tables = _pooled_sections(speedups, baseline, replicate_rows)
    else:
        tables = _scenario_sections(speedups, baseline)
    return [
        Paragraph(_summary_sentence(run)),
        Heading("Plots"),
        *(plot if plot.png else skipped_plot(plot) for plot in all_plots(speedups, baseline)),
        *tables,
        *[Paragraph(line) for line in drift_lines(rows)],
        *_disagreements(rows),
        *hardware_gap_blocks(rows),
        *_repeat_spread(speedups, baseline),
        *_failures(rows),
    ]


def _no_rows_sentence(run: Run) -> str:
    kind = "a probe run" if run.manifest.kind == "probe" else f"run {run.manifest.status or '?'}"
    return f"No benchmark rows ({kind}): the plots and result tables are left out."


def _summary_sentence(run: Run) -> str:
    env = run.manifest.environment
    rows = run.rows
    ok = sum(row.status == RowStatus.OK for row in rows)
    cases = len({row.case.case_id for row in rows if row.case.case_id is not None})
    return (
        f"{len(rows)} rows ({ok} ok, {len(rows) - ok} failed) over {cases} cases on "
        f"{env.get('device_name', '?')} ({env.get('device_kind', '?')}), torch {env.get('torch', '?')}, "
        f"{env.get('threads', '?')} threads; run {run.manifest.status or '?'}, "
        f"started {run.manifest.started_at or '?'}."
    )


def _scenario_sections(speedups: pd.DataFrame, baseline: str) -> list[Block]:
    blocks: list[Block] = [Heading("Results")]
    if baseline not in set(speedups[IMPL]):
        blocks.append(Paragraph(f"No {baseline} rows in this run: speedups are not shown."))
    for scenario, group in speedups.groupby(SCENARIO, sort=False):
        table = _with_throughput(results_table(group, baseline, title=f"Scenario {scenario}"))
        blocks += [Heading(f"Scenario {scenario}", 3), table]
        blocks += [Paragraph(sentence) for sentence in _sample_sentences(group)]
    return blocks


def _pooled_sections(speedups: pd.DataFrame, baseline: str, replicate_rows: bool) -> list[Block]:
    """A replicated run's results: per scenario one pooled row per case and implementation; each process's
    rows after them with ``replicate_rows`` (``report --replicate-rows``), else where to find them."""
    where = "the section below" if replicate_rows else PER_PROCESS_ROWS
    blocks: list[Block] = [Heading("Results"), Paragraph(pooled_note(repeat_count(speedups), where))]
    if baseline not in set(speedups[IMPL]):
        blocks.append(Paragraph(f"No {baseline} rows in this run: speedups are not shown."))
    for scenario, group in speedups.groupby(SCENARIO, sort=False):
        table = _with_throughput(pooled_table(group, baseline, title=f"Scenario {scenario}"))
        blocks += [Heading(f"Scenario {scenario}", 3), table]
    if not replicate_rows:
        return blocks
    blocks.append(Heading("Each process's rows"))
    for scenario, group in speedups.groupby(SCENARIO, sort=False):
        title = f"Scenario {scenario}, each process"
        blocks += [Heading(title, 3), _with_throughput(results_table(group, baseline, title=title))]
        blocks += [Paragraph(sentence) for sentence in _sample_sentences(group)]
    return blocks


def _sample_sentences(group: pd.DataFrame) -> list[str]:
    """How many ok rows are noisy, have too few samples to tell, or ran out of their timing cap."""
    ok = group[group[STATUS] == RowStatus.OK]
    noisy = sum(flag(value) is True for value in ok[NOISY])
    few = int((pd.to_numeric(ok[SAMPLE_COUNT], errors="coerce") < MIN_SPREAD_SAMPLES).sum())
    capped = sum(flag(value) is True for value in ok.get(CAPPED, []))
    counted = [
        (noisy, "marked noisy: IQR above the run's noise threshold of the median"),
        (few, f"with fewer than {MIN_SPREAD_SAMPLES} samples: no IQR, so neither noisy nor steady (n/a)"),
        (capped, "capped: max_run_time_s ran out before min_samples samples and min_run_time_s of timing"),
    ]
    return [f"{count} row(s) {what}." for count, what in counted if count]


def _with_throughput(table: TableModel) -> TableModel:
    """The results table plus whether the kernel skips masked work, after the executed-over-useful FLOPs, where
    the run has causal rows: a kernel that skips the masked half executes about its useful FLOPs, one that computes
    the masked scores and discards them executes more, a waste the useful rate alone would hide."""
    records = table.records if table.records is not None else pd.DataFrame()
    if not (_flag(records, CAUSAL).any() and records.get(SKIPS_MASKED_WORK, pd.Series(dtype=object)).notna().any()):
        return table
    cells = [_yes_no(v) for v in records[SKIPS_MASKED_WORK]]
    at = list(table.headers).index(THROUGHPUT_LABELS[EXECUTED_OVER_USEFUL]) + 1
    return dataclasses.replace(
        table,
        headers=[*table.headers[:at], label(SKIPS_MASKED_WORK), *table.headers[at:]],
        cells=[[*row[:at], cells[i], *row[at:]] for i, row in enumerate(table.cells)],
        numeric=[*table.numeric[:at], True, *table.numeric[at:]],
    )


def _yes_no(value: object) -> str:
    text = str(value).lower()
    return "yes" if text == "true" else "no" if text == "false" else "-"


def _flag(rows: pd.DataFrame, name: str) -> pd.Series:
    """A boolean column as True/False whatever the file stored (bool, "True", empty)."""
    return rows[name].astype(str).str.lower().eq("true") if name in rows else pd.Series(False, index=rows.index)


DISAGREEMENT_HEADERS = (
    "case",
    "impl",
    "FLOPs model",
    "FLOPs counted",
    "bytes model",
    "bytes counted",
    "FLOP/B model",
    "FLOP/B counted",
    "gap",
)


def _disagreements(rows: pd.DataFrame) -> list[Block]:
    """Rows whose counted FLOPs or bytes are more than 25 % from the cost model, once per (case, impl)."""
    heading = Heading("Model disagreements")
    if MEASURED_FLOPS not in rows or rows[MEASURED_FLOPS].isna().all():
        return [heading, Paragraph("Not available: no row has counted FLOPs and bytes (a run older than the counter).")]
    flagged = rows[_flag(rows, MODEL_DISAGREES)].drop_duplicates([CASE_ID, IMPL])
    if flagged.empty:
        return [heading, Paragraph("None: every counted row is within 25 % of its cost model.")]
    cells = [
        [
            case_label(r),
            str(r[IMPL]),
            human_count(r[FLOPS]),
            human_count(r[MEASURED_FLOPS]),
            human_bytes(r[BYTES_MOVED]),
            human_bytes(r[MEASURED_BYTES]),
            format_number(r[ARITHMETIC_INTENSITY], ".1f"),
            format_number(r[MEASURED_INTENSITY], ".1f"),
            format_number(r[MODEL_DISAGREEMENT], ".0%"),
        ]
        for _, r in flagged.iterrows()
    ]
    text = (
        f"{len(cells)} row(s) whose FLOPs or bytes counted from the dispatched ops differ from the cost model "
        "by more than 25 %: the model does not describe what ran (gap: the larger relative difference)."
    )
    numeric = [False, False, *[True] * 7]
    return [heading, Paragraph(text), TableModel("Model disagreements", DISAGREEMENT_HEADERS, cells, numeric)]


SPREAD_HEADERS = (
    "case",
    "impl",
    "repeats",
    "median ms per repeat",
    "median ms",
    "latency spread",
    "speedup",
    "speedup spread",
)


def _repeat_spread(speedups: pd.DataFrame, baseline: str) -> list[Block]:
    """Per case and implementation, how far its repeats landed apart (only for ``run --repeat N``)."""
    if repeat_count(speedups) < 2:
        return []
    spread = spread_of(speedups)
    cells = [
        [
            str(r["case"]),
            str(r[IMPL]),
            str(r["repeats"]),
            " / ".join(f"{v:.3f}" for v in r["latency_ms_by_repeat"]),
            format_number(r[LATENCY_MS], ".3f"),
            format_number(r["latency_spread"], ".1%"),
            format_number(r["speedup"], ".2f", "×"),
            format_number(r["speedup_spread"], ".1%"),
        ]
        for _, r in spread.iterrows()
    ]
    text = (
        f"{repeat_count(speedups)} repeats. Spread: (max − min) / median over the repeats where the row was ok; "
        f"speedup: median over repeats of the speedup vs {baseline}."
    )
    numeric = [False, False, *[True] * 6]
    table = TableModel("Run-to-run spread", SPREAD_HEADERS, cells, numeric, groups=list(spread[CASE_ID]))
    return [Heading("Run-to-run spread"), Paragraph(text), table]


def _failures(rows: pd.DataFrame) -> list[Block]:
    failed = rows[rows[STATUS] != RowStatus.OK]
    if failed.empty:
        return [Heading("Failed rows"), Paragraph("None: every row ran and matched the float64 reference.")]
    headers = ("scenario", "case", "impl", "status", "error")
    cells = [
        [str(r[SCENARIO]), case_label(r), str(r[IMPL]), str(r[STATUS]), str(r[ERROR])] for _, r in failed.iterrows()
    ]
    return [Heading("Failed rows"), TableModel("Failed rows", headers, cells, [False] * 5, ["failed"] * len(cells))]


def _environment_table(run: Run) -> TableModel:
    facts = {
        "run id": run.run_id,
        "status": run.manifest.status,
        "started": run.manifest.started_at,
        "finished": run.manifest.finished_at,
        **run.manifest.environment,
    }
    return TableModel("Environment", ("field", "value"), [[k, str(v)] for k, v in facts.items()], [False, False])


def _roofline_table(run: Run) -> list[Block]:
    """The device peaks the run's roofline used, per dtype (the manifest's ``roofline``)."""
    peaks = run.manifest.roofline
    if not peaks:
        return []
    headers = ("dtype", "peak TFLOP/s", "peak GB/s", "source")
    cells = [
        [
            str(dtype),
            format_number(p.get("peak_tflops"), ".4g"),
            format_number(p.get("peak_gbps"), ".4g"),
            str(p.get("source")),
        ]
        for dtype, p in peaks.items()
    ]
    return [TableModel("Roofline", headers, cells, [False, True, True, False])]
