"""What ``mhabench advise`` shows: the terminal (rich), Markdown and JSON; the few lines ``mhabench run``
prints under its table; and the Advice section at the top of a report.

``mhabench.analysis.advice`` gives each statement as a reason code and its numbers; :mod:`mhabench.views.wording`
writes its sentence, and this module lays the sentences out, per run, per case group and per kind of statement, so
the formats cannot say different things. JSON is the answer record itself: codes and numbers, no sentences.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Sequence
from pathlib import Path

from rich.console import RenderableType
from rich.rule import Rule
from rich.text import Text

from mhabench.analysis.advice import caveats, why
from mhabench.analysis.advice.advise import Advice, RunAdvice
from mhabench.analysis.advice.crossover import GROUP
from mhabench.analysis.answer import SCHEMA_VERSION, CaseAnswer, Verdict, plain
from mhabench.analysis.estimate import PAIRED
from mhabench.analysis.explain.explain import EXPLAINED
from mhabench.analysis.statement import (
    ACROSS,
    CAVEAT,
    CHANGE,
    CROSSOVER,
    ENERGY,
    KINDS,
    PICK,
    WHY,
    Statement,
)
from mhabench.views import formats
from mhabench.views.report.blocks import Block, Heading, Paragraph
from mhabench.views.spelling import interval
from mhabench.views.table import TableModel
from mhabench.views.wording import machine, reason_of, said, sentence

FORMATS = ("terminal", "md", "json")
TITLES = {
    PICK: "Pick",
    CROSSOVER: "Where the answer changes",
    WHY: "Why",
    ENERGY: "Energy",
    CHANGE: "What to change",
    CAVEAT: "What this run cannot tell",
    ACROSS: "Across runs",
}
WHY_PREFERENCE = (why.ROOFLINE, why.MEMORY, why.LAUNCH, why.SCORES)
"""Which "why" about the winner's own row the run summary quotes, most telling first: where the winner stands
on its roofline says most about what limits it; a why about a loser (its materialized scores) explains less."""
DOUBTS = (caveats.NO_INTERVAL, caveats.MAY_NOT_REPLICATE, caveats.UNCALIBRATED)
"""Caveats that say the answer itself may not hold, or that nothing says it would hold in another process (a
machine with no calibration): the run summary quotes one before any why."""
SUMMARY_GROUPS = 2
"""Groups the run summary answers line by line; the rest are counted in its last line."""


def parse_format(text: str) -> str:
    """``advise --format``: the shared vocabulary (``md`` or ``markdown``), limited to what advise writes."""
    return formats.parse_format(text, FORMATS)


def statements(run: RunAdvice) -> list[Statement]:
    """Every statement said of ``run``: advise's, with each case's pick and where its compared rows stand on the
    roofline said from the record (:mod:`mhabench.analysis.answer`), in the order a reader wants them: a group's
    answer, its picks, its crossovers, each case's whys (the roofline first), the rest; then the run's caveats."""
    answers = [s for s in run.statements if s.rule == GROUP]
    groups = {answer.group for answer in answers}
    out: list[Statement] = []
    for answer in answers:
        rest = [s for s in run.statements if s.group == answer.group and s is not answer]
        cases = [case for case in run.record.cases if case.group == answer.group]
        whys = [s for s in rest if s.kind == WHY and s.rule != EXPLAINED]
        out += [answer, *(pick_statement(case) for case in cases)]
        out += [s for s in rest if s.kind == CROSSOVER]
        for case in cases:
            out += [*_rooflines(case), *(s for s in whys if s.scope == case.label)]
        out += [s for s in rest if s.kind not in (CROSSOVER, WHY) or s.rule == EXPLAINED]
    return out + [s for s in run.statements if s.group not in groups]


def pick_statement(case: CaseAnswer) -> Statement:
    """The case's pick, said from its record."""
    return Statement(PICK, PICK, case.group, case.label, {"case": case})


def roofline_statement(case: CaseAnswer, name: str) -> Statement | None:
    """Where ``name``'s row stands on its roofline: the record's why of it (None where it has none)."""
    one = case.impl(name)
    if one is None or one.why is None:
        return None
    figures = {"impl": name, **dataclasses.asdict(one.why)}
    return Statement(WHY, why.ROOFLINE, case.group, case.label, figures)


def _rooflines(case: CaseAnswer) -> list[Statement]:
    """Where the fastest row and the runner-up stand on their roofline."""
    found = [roofline_statement(case, name) for name in (case.fastest, case.runner_up) if name]
    return [statement for statement in found if statement is not None]


def _groups(run: RunAdvice) -> list[tuple[Statement, list[Statement]]]:
    """Per case group: its answer, then its other statements."""
    found: dict[str, tuple[Statement, list[Statement]]] = {}
    for statement in statements(run):
        if statement.rule == GROUP:
            found[statement.group] = (statement, [])
        elif statement.group in found:
            found[statement.group][1].append(statement)
    return list(found.values())


def _caveats(run: RunAdvice) -> list[Statement]:
    return [statement for statement in run.statements if statement.kind == CAVEAT]


def _heading(run: RunAdvice) -> str:
    return f"{run.run_id} on {machine(run.record.device, run.record.torch)}"


# --- the layout every text format renders -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CaseBlock:
    """One case: the line a user acts on, then the evidence under it (each once, without the case's label)."""

    label: str
    action: str
    evidence: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class GroupBlock:
    """A case group: its answer, its cases (cases with the same action share a block), what holds across them."""

    answer: Statement
    cases: tuple[CaseBlock, ...]
    across: tuple[Statement, ...]
    """Statements about the group rather than one case (where the answer changes, what to change), in kind order."""


def layout(run: RunAdvice) -> list[GroupBlock]:
    """Every group of ``run`` laid out. A statement whose scope is a case is evidence under that case, whatever
    its kind, so a new kind of statement slots in under its case without a change here; any other statement
    of the group is said across its cases. Evidence that repeats across the group's cases (the same rule
    about the same implementation) is said whole once, then by its reason alone."""
    blocks = []
    for answer, rest in _groups(run):
        picks = [s for s in rest if s.kind == PICK]
        labels = {s.scope for s in picks}
        seen: set[tuple[str, ...]] = set()
        cases = [
            _case_block(pick, [s for s in rest if s.scope == pick.scope and s.kind != PICK], seen) for pick in picks
        ]
        across = sorted((s for s in rest if s.scope not in labels), key=lambda s: _kind_order(s.kind))
        blocks.append(GroupBlock(answer, tuple(_merged(cases)), tuple(across)))
    return blocks


def _kind_order(kind: str) -> int:
    """A statement's place among the kinds; a kind this view does not know yet goes last, never nowhere."""
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _case_block(pick: Statement, evidence: Sequence[Statement], seen: set[tuple[str, ...]]) -> CaseBlock:
    """The action (``use `X`: 1.25× [1.24–1.26] faster than `Y`, because …``) and what it rests on.

    A rule that already spoke of the same implementation in an earlier case of the group is said by its
    reason alone (``naive is memory-bound``, where the sentence is mostly figures after it), with
    ``(as above)`` where even that reason is the same: the figures are in the first case, in
    ``--format json`` and in the report."""
    lines = [f"pick: {_pick_detail(pick)}"]
    for statement in sorted(evidence, key=lambda s: _kind_order(s.kind)):
        text = said(statement)
        subject = (statement.rule, statement.impl)
        reason = (*subject, reason_of(statement).rstrip("."))
        short = subject in seen and len(reason[-1]) < len(text) / 2  # a reason, not a sentence of figures
        lines.append((f"{reason[-1]} (as above)" if reason in seen else reason[-1]) if short else text)
        seen.update({subject, reason})
    return CaseBlock(pick.scope, _action(pick), tuple(dict.fromkeys(lines)))


def _pick_detail(pick: Statement) -> str:
    """What the pick rests on, without what the action line already says: for a winner the method alone
    (``paired over 8 rounds``), otherwise the pick's sentence (the tie's ratio and why it is a tie)."""
    case: CaseAnswer = pick.figures["case"]
    lead = case.lead
    if case.verdict is Verdict.WINNER and lead is not None and lead.method == PAIRED and case.reason is None:
        return f"paired over {lead.rounds} rounds"
    return said(pick).removeprefix("no clear winner: ")


ACTIONS = {
    Verdict.WINNER: "use `{pick}`: {lead} faster than `{runner_up}`{because}",
    Verdict.TIE: "use either {tied}: no clear winner",
    Verdict.CANNOT_TELL: "cannot tell",
    Verdict.ONLY: "only `{pick}` ran ok",
    Verdict.NOTHING_RAN: "nothing ran ok",
}
"""The line a user acts on, by the case's verdict (the record's, :mod:`mhabench.analysis.answer`)."""


def _action(pick: Statement) -> str:
    """The line a user acts on: which implementation to run, by how much, and where the winner stands."""
    case: CaseAnswer = pick.figures["case"]
    lead = case.lead
    bounds = f" {interval(lead.interval.ci_low, lead.interval.ci_high)}" if lead and lead.has_interval else ""
    shown = f"{lead.ratio:.2f}×{bounds}" if lead else ""
    return ACTIONS[case.verdict].format(
        pick=case.pick,
        lead=shown,
        runner_up=case.runner_up,
        tied=" or ".join(f"`{impl}`" for impl in sorted(case.tied)),
        because=_because(case),
    )


def _because(case: CaseAnswer) -> str:
    """Where the winner stands on its roofline: its bound, or far from both roofs (under ``LOW_EFFICIENCY``)."""
    found = case.impl(case.pick) if case.pick else None
    if found is None or found.why is None:
        return ""
    return (
        f", because `{case.pick}` is {'far from both roofs' if found.why.far_from_roof else f'{found.why.bound}-bound'}"
    )


def _merged(cases: Sequence[CaseBlock]) -> list[CaseBlock]:
    """Cases whose action and evidence read the same once their labels are gone are said once, labels joined."""
    merged: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for case in cases:
        merged.setdefault((case.action, case.evidence), []).append(case.label)
    return [CaseBlock("; ".join(labels), action, evidence) for (action, evidence), labels in merged.items()]


# --- terminal -----------------------------------------------------------------------------------


def _rich_line(text: str, prefix: str = "• ") -> Text:
    """A sentence of :mod:`mhabench.views.wording` with its `names` in bold; nothing in it is read as rich markup."""
    parts = text.split("`")
    line = Text(prefix)
    for index, part in enumerate(parts):
        line.append(part, style="bold" if index % 2 else None)
    return line


def to_terminal(advice: Advice) -> list[RenderableType]:
    out: list[RenderableType] = []
    for run in advice.runs:
        out.append(Rule(_heading(run)))
        for group in layout(run):
            out.append(_rich_line(sentence(group.answer), prefix=""))
            for case in group.cases:
                out.append(Text(f"  {case.label}", style="underline"))
                out.append(_rich_line(case.action, prefix="    → "))
                out += [_rich_line(line, prefix="        · ") for line in case.evidence]
            if group.across:
                out.append(Text("  Across the cases", style="underline"))
                out += [_rich_line(sentence(s), prefix="    • ") for s in group.across]
        if _caveats(run):
            out.append(Text(TITLES[CAVEAT], style="underline"))
            out += [_rich_line(sentence(s), prefix="  • ") for s in _caveats(run)]
    if advice.across:
        out.append(Rule(TITLES[ACROSS]))
        out += [_rich_line(sentence(s)) for s in advice.across]
    return out


# --- Markdown -----------------------------------------------------------------------------------


def _md(text: str) -> str:
    """HTML-escaped (Markdown renderers pass raw HTML through); backticks stay code."""
    return html.escape(text, quote=False)


def to_markdown(advice: Advice) -> str:
    lines = ["# mhabench advise", ""]
    for run in advice.runs:
        lines += [f"## {_md(_heading(run))}", ""]
        for group in layout(run):
            lines += [f"### {_md(group.answer.group)}", "", f"**{_md(sentence(group.answer))}**", ""]
            for case in group.cases:
                lines += [f"- {_md(case.label)}: **{_md(case.action)}**", *(f"  - {_md(e)}" for e in case.evidence)]
            lines += [""]
            if group.across:
                lines += ["Across the cases:", "", *(f"- {_md(sentence(s))}" for s in group.across), ""]
        if _caveats(run):
            lines += [f"### {TITLES[CAVEAT]}", "", *(f"- {_md(sentence(s))}" for s in _caveats(run)), ""]
    if advice.across:
        lines += [f"## {TITLES[ACROSS]}", "", *(f"- {_md(sentence(s))}" for s in advice.across), ""]
    return "\n".join(lines)


# --- JSON ---------------------------------------------------------------------------------------


def to_json(advice: Advice) -> str:
    """The record itself (:meth:`mhabench.analysis.answer.RunAnswer.record`, docs/advise.md): one run's record, or
    for several runs their records and what differs across them, as reason codes with their numbers."""
    records = [run.record.record() for run in advice.runs]
    if len(records) == 1:
        return json.dumps(records[0], indent=2, allow_nan=False)
    across = [{"code": s.rule, "numbers": plain(s.figures), "scope": s.scope} for s in advice.across]
    return json.dumps({"schema_version": SCHEMA_VERSION, "runs": records, "across": across}, indent=2)


# --- under mhabench run's table -----------------------------------------------------------------


def short_answer(advice: Advice, run_dir: Path) -> list[str]:
    """Three to five lines: each group's answer (the first ``SUMMARY_GROUPS``); then, where the run doubts its
    own answer (a lead within the machine's spread, an uncalibrated machine, no interval), that caveat, since it
    outweighs any why; else one why about a winner's own row, else the run's first caveat; and where the rest
    is."""
    run = advice.runs[0]
    groups = _groups(run)
    lines = [f"Answer: {sentence(answer)}" for answer, _ in groups[:SUMMARY_GROUPS]]
    doubt = next((s for s in _caveats(run) if s.rule in DOUBTS), None)
    reason = doubt or _telling_why(run, {answer.group for answer, _ in groups[:SUMMARY_GROUPS]})
    reason = reason or next(iter(_caveats(run)), None)
    if reason is not None:
        lines.append(f"{'Why' if reason.kind == WHY else 'Caveat'}: {sentence(reason)}")
    more = len(groups) - SUMMARY_GROUPS
    rest = f" ({more} more case group{'s' if more > 1 else ''} there)" if more > 0 else ""
    lines.append(f"Every pick, crossover, why and caveat, with the rows it rests on{rest}: mhabench advise {run_dir}")
    return lines


def _telling_why(run: RunAdvice, groups: set[str]) -> Statement | None:
    """A why about the winner's own row in the last case of ``groups`` with a clear winner (a sweep's last
    case is its largest; or the case ``scope``), the most telling rule first: the answer lines name that
    winner, so the why says what holds for it rather than what held the loser back."""
    found = statements(run)
    won = [s.figures["case"] for s in found if s.rule == PICK and s.group in groups]
    last = next((case for case in reversed(won) if case.verdict is Verdict.WINNER), None)
    if last is None:
        return None
    whys = [
        s for s in found if s.kind == WHY and s.scope == last.label and s.rule in WHY_PREFERENCE and s.impl == last.pick
    ]
    return min(whys, key=lambda s: WHY_PREFERENCE.index(s.rule), default=None)


# --- the report's section -----------------------------------------------------------------------


def report_blocks(advice: Advice) -> list[Block]:
    """The Advice section, short enough to read before the results: per group its answer, then one line per
    pick, crossover and change and the most telling why of each case; the caveats. ``mhabench advise``
    has every statement."""
    run = advice.runs[0]
    blocks: list[Block] = [
        Heading("Advice"),
        Paragraph(
            "What mhabench advise says on this run: which implementation to run per case, where the answer "
            "changes, the most telling why of each case, and what the run cannot tell. Every why, with the rows "
            "each statement rests on: mhabench advise (docs/advise.md)."
        ),
    ]
    for answer, rest in _groups(run):
        blocks += [Heading(answer.group, 3), Paragraph(sentence(answer))]
        shown = _for_the_report(rest)
        if shown:
            blocks.append(_table(f"Advice: {answer.group}", shown))
    if _caveats(run):
        blocks.append(_table(TITLES[CAVEAT], _caveats(run)))
    return blocks


def _for_the_report(statements: Sequence[Statement]) -> list[Statement]:
    """Every statement but the whys, and of each case's whys the most telling one (``WHY_PREFERENCE``)."""
    whys: dict[str, Statement] = {}
    for statement in statements:
        if statement.kind == WHY and statement.rule in WHY_PREFERENCE:
            held = whys.get(statement.scope)
            if held is None or WHY_PREFERENCE.index(statement.rule) < WHY_PREFERENCE.index(held.rule):
                whys[statement.scope] = statement
    return [s for s in statements if s.kind != WHY or whys.get(s.scope) is s]


def _table(title: str, statements: Sequence[Statement]) -> TableModel:
    cells = [[TITLES[s.kind], sentence(s)] for s in statements]
    return TableModel(title, ("kind", "statement"), cells, [False, False], groups=[s.kind for s in statements])
