"""What ``mhabench advise`` shows: the terminal (rich), Markdown and JSON; the few lines ``mhabench run``
prints under its table; and the Advice section at the top of a report.

The sentences are made by ``mhabench.analysis.advice``; this module only lays them out, per run, per
case group and per kind of statement, so the three formats cannot say different things. JSON keeps
every statement's figures and the rows it rests on, for a tool or a CI job.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.rule import Rule
from rich.text import Text

from mhabench.analysis.advice import thresholds
from mhabench.analysis.advice.advise import Advice, RunAdvice
from mhabench.analysis.advice.pick import WINNER
from mhabench.analysis.advice.statement import ACROSS, CAVEAT, CHANGE, CROSSOVER, KINDS, PICK, WHY, Statement
from mhabench.analysis.stats import CONFIDENCE_LEVEL, MIN_INTERVAL_SAMPLES
from mhabench.errors import InputError
from mhabench.views.report.blocks import Block, Heading, Paragraph
from mhabench.views.table import TableModel

FORMATS = ("terminal", "markdown", "json")
TITLES = {
    PICK: "Pick",
    CROSSOVER: "Where the answer changes",
    WHY: "Why",
    CHANGE: "What to change",
    CAVEAT: "What this run cannot tell",
    ACROSS: "Across runs",
}
GROUP_RULE = "group"
"""The rule of a group's one-sentence answer (``mhabench.analysis.advice.summary``): the group's headline."""
WHY_PREFERENCE = ("scores", "launch", "roofline", "memory", "did_not_fit")
"""Which "why" the run summary quotes, most telling first."""
SUMMARY_GROUPS = 2
"""Groups the run summary answers line by line; the rest are counted in its last line."""


def parse_format(text: str) -> str:
    if text not in FORMATS:
        raise InputError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return text


def _groups(run: RunAdvice) -> list[tuple[Statement, list[Statement]]]:
    """Per case group: its answer, then its other statements."""
    found: dict[str, tuple[Statement, list[Statement]]] = {}
    for statement in run.statements:
        if statement.rule == GROUP_RULE:
            found[statement.group] = (statement, [])
        elif statement.group in found:
            found[statement.group][1].append(statement)
    return list(found.values())


def _by_kind(statements: Sequence[Statement]) -> list[tuple[str, list[Statement]]]:
    return [
        (kind, [s for s in statements if s.kind == kind]) for kind in KINDS if any(s.kind == kind for s in statements)
    ]


def _caveats(run: RunAdvice) -> list[Statement]:
    return [statement for statement in run.statements if statement.kind == CAVEAT]


def _heading(run: RunAdvice) -> str:
    return f"{run.run_id} on {run.answers.device()}"


# --- terminal -----------------------------------------------------------------------------------


def _rich_line(text: str, prefix: str = "• ") -> Text:
    """The sentence with `names` in bold; nothing in it is read as markup."""
    parts = text.split("`")
    line = Text(prefix)
    for index, part in enumerate(parts):
        line.append(part, style="bold" if index % 2 else None)
    return line


def to_terminal(advice: Advice) -> list[RenderableType]:
    out: list[RenderableType] = []
    for run in advice.runs:
        out.append(Rule(_heading(run)))
        for answer, rest in _groups(run):
            out.append(_rich_line(answer.text, prefix=""))
            for kind, statements in _by_kind(rest):
                out.append(Text(f"  {TITLES[kind]}", style="underline"))
                out += [_rich_line(s.text, prefix="    • ") for s in statements]
        if _caveats(run):
            out.append(Text(TITLES[CAVEAT], style="underline"))
            out += [_rich_line(s.text, prefix="  • ") for s in _caveats(run)]
    if advice.across:
        out.append(Rule(TITLES[ACROSS]))
        out += [_rich_line(s.text) for s in advice.across]
    return out


# --- Markdown -----------------------------------------------------------------------------------


def _md(text: str) -> str:
    """HTML-escaped (Markdown renderers pass raw HTML through); backticks stay code."""
    return html.escape(text, quote=False)


def to_markdown(advice: Advice) -> str:
    lines = ["# mhabench advise", ""]
    for run in advice.runs:
        lines += [f"## {_md(_heading(run))}", ""]
        for answer, rest in _groups(run):
            lines += [f"### {_md(answer.group)}", "", f"**{_md(answer.text)}**", ""]
            for kind, statements in _by_kind(rest):
                lines += [f"{TITLES[kind]}:", "", *(f"- {_md(s.text)}" for s in statements), ""]
        if _caveats(run):
            lines += [f"### {TITLES[CAVEAT]}", "", *(f"- {_md(s.text)}" for s in _caveats(run)), ""]
    if advice.across:
        lines += [f"## {TITLES[ACROSS]}", "", *(f"- {_md(s.text)}" for s in advice.across), ""]
    return "\n".join(lines)


# --- JSON ---------------------------------------------------------------------------------------


def thresholds_record() -> dict[str, Any]:
    """Every number the rules decide by (docs/advise.md), so a consumer knows what "tied" meant."""
    return {
        "confidence_level": CONFIDENCE_LEVEL,
        "min_interval_samples": MIN_INTERVAL_SAMPLES,
        "tie_margin": thresholds.TIE_MARGIN,
        "reproduce_margin": thresholds.REPRODUCE_MARGIN,
        "host_us_per_op": thresholds.HOST_US_PER_OP,
        "launch_bound_share": thresholds.LAUNCH_BOUND_SHARE,
        "host_over_device": thresholds.HOST_OVER_DEVICE,
        "low_efficiency": thresholds.LOW_EFFICIENCY,
    }


def to_json(advice: Advice) -> str:
    runs = [
        {
            "run_id": run.run_id,
            "device": run.answers.device(),
            "device_kind": run.answers.environment.get("device_kind"),
            "torch": run.answers.environment.get("torch"),
            "git_commit": run.answers.environment.get("git_commit"),
            "status": run.answers.run.manifest.get("status"),
        }
        for run in advice.runs
    ]
    statements = [statement.record() for statement in advice.statements]
    return json.dumps({"runs": runs, "thresholds": thresholds_record(), "statements": statements}, indent=2)


# --- under mhabench run's table -----------------------------------------------------------------


def short_answer(advice: Advice, run_dir: Path) -> list[str]:
    """Three to five lines: each group's answer (the first ``SUMMARY_GROUPS``), one why (or, where no
    case has a winner, the first thing the run cannot tell), and where the rest is."""
    run = advice.runs[0]
    groups = _groups(run)
    lines = [f"Answer: {answer.text}" for answer, _ in groups[:SUMMARY_GROUPS]]
    reason = _telling_why(run) or next(iter(_caveats(run)), None)
    if reason is not None:
        lines.append(f"{'Why' if reason.kind == WHY else 'Caveat'}: {reason.text}")
    more = len(groups) - SUMMARY_GROUPS
    rest = f" ({more} more case group{'s' if more > 1 else ''} there)" if more > 0 else ""
    lines.append(f"Every pick, crossover, why and caveat, with the rows it rests on{rest}: mhabench advise {run_dir}")
    return lines


def _telling_why(run: RunAdvice) -> Statement | None:
    """A why of the last case with a clear winner in the first group, the most telling rule first."""
    won = [s.scope for s in run.statements if s.kind == PICK and s.figures.get("verdict") == WINNER]
    if not won:
        return None
    whys = [s for s in run.statements if s.kind == WHY and s.scope == won[-1]]
    ranked = sorted(
        whys, key=lambda s: WHY_PREFERENCE.index(s.rule) if s.rule in WHY_PREFERENCE else len(WHY_PREFERENCE)
    )
    return ranked[0] if ranked else None


# --- the report's section -----------------------------------------------------------------------


def report_blocks(advice: Advice) -> list[Block]:
    """The Advice section: per group its answer, then a table of its statements by kind; the caveats."""
    run = advice.runs[0]
    blocks: list[Block] = [
        Heading("Advice"),
        Paragraph(
            "What mhabench advise says on this run: which implementation to run per case, where the answer "
            "changes, why, and what the run cannot tell (docs/advise.md; --format json for the rows each "
            "statement rests on)."
        ),
    ]
    for answer, rest in _groups(run):
        blocks += [Heading(answer.group, 3), Paragraph(answer.text)]
        if rest:
            blocks.append(_table(f"Advice: {answer.group}", rest))
    if _caveats(run):
        blocks.append(_table(TITLES[CAVEAT], _caveats(run)))
    return blocks


def _table(title: str, statements: Sequence[Statement]) -> TableModel:
    cells = [[TITLES[s.kind], s.text] for s in statements]
    return TableModel(title, ("kind", "statement"), cells, [False, False], groups=[s.kind for s in statements])
