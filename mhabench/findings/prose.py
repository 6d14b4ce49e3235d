"""The sentences a page states its claims in, and the findings README's table: rendered from the claim blocks
and the stored check reports, so that no timed claim is worded more strongly than its runs support."""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.findings.claims import Claim, Kind
from mhabench.findings.grade import Level
from mhabench.findings.report import ClaimRecord, GradeRecord, Report, started


def impl(name: str) -> str:
    return f"`{name}`"


def case_words(claim: Claim) -> str:
    """``kv_heads 2, batch 256``; a flag as the block spells it (``causal true``)."""
    return ", ".join(
        f"{name} {str(value).lower() if isinstance(value, bool) else value}" for name, value in claim.case.items()
    )


def setting_words(claim: Claim) -> str:
    """`` (1 thread, allocator system)``: the run settings a claim fixes, or nothing."""
    said = [f"{claim.threads} thread{'s' if claim.threads != 1 else ''}"] if claim.threads is not None else []
    said += [f"allocator {claim.allocator}"] if claim.allocator is not None else []
    return f" ({', '.join(said)})" if said else ""


def bounds(low: float, high: float | None) -> str:
    return f"{low:.2f}× or more" if high is None else f"{low:.2f}–{high:.2f}×"


def statement(claim: Claim) -> str:
    """What the claim says, in words: the block and nothing else."""
    names = [impl(name) for name in claim.impls]
    where = f"at {case_words(claim)}{setting_words(claim)}"
    if claim.kind == Kind.WINNER:
        return f"{names[0]} wins {where}"
    if claim.kind == Kind.TIE:
        return f"{', '.join(names[:-1])} and {names[-1]} are tied {where}"
    if claim.kind == Kind.RATIO:
        assert claim.figure is not None
        return f"{names[0]} is {bounds(*claim.figure)} as fast as {names[1]} {where}"
    if claim.kind == Kind.ORDERING:
        return f"fastest to slowest {where}: {', '.join(names)}, each clearly faster than the next"
    if claim.kind == Kind.SLOWEST:
        return f"{names[0]} is the slowest {where}"
    assert claim.figure is not None
    size = "at least" if claim.figure == (1.0, None) else bounds(*claim.figure)
    return f"{names[0]} is {size} as fast as {names[1]} in every process {where}"


def measured(one: GradeRecord) -> str:
    """```…073028Z`: `fused` 1.23× [1.10–1.40] over `naive` (processes 1.15–1.31×), holds``: the speedup of the first
    over the second, with the processes' range where there are several."""
    short = "…" + one.run_id.split("-", 1)[0][-7:]
    figure = ""
    if one.ratio is not None:
        figure = f"{impl(one.pair[0])} {one.ratio:.2f}×"
        if one.ci_low is not None and one.ci_high is not None:
            figure += f" [{one.ci_low:.2f}–{one.ci_high:.2f}]"
        figure += f" over {impl(one.pair[1])}"
        if len(one.per_process) > 1:
            figure += f" (processes {min(one.per_process):.2f}–{max(one.per_process):.2f}×)"
        figure += ", "
    return f"`{short}`: {figure}{one.grade}"


LEVEL_WORDS = {
    Level.HELD: "**Held** in two sittings an hour or more apart",
    Level.SEEN_ONCE: "**Seen once**, not yet held in two sittings an hour apart",
    Level.DID_NOT_HOLD: "**Did not hold**",
}


def claim_text(record: ClaimRecord | None, claim: Claim) -> str:
    """The sentence a page holds between a claim's block and its closing comment (ending in a newline)."""
    said = statement(claim)
    if record is None or not record.grades:
        return f"{said[0].upper()}{said[1:]}. Not checked yet.\n"
    grades = "; ".join(measured(one) for one in record.grades)
    return f"{said[0].upper()}{said[1:]}. {LEVEL_WORDS[record.level]}: {grades}.\n"


def _checked(report: Report) -> str:
    machines = sorted({run.machine for run in report.runs})
    days = sorted({started(run).strftime("%Y-%m-%d") for run in report.runs})
    return f"{report.checked_at[:10]} (runs of {', '.join(days) or 'none'}; {'; '.join(machines) or '?'})"


def readme_table(reports: Sequence[Report]) -> str:
    """The findings README's table: per page, its claims, when it was last checked and on what, and the levels."""
    lines = [
        "| page | claims | last checked (runs; machine) | held | seen once | did not hold |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for report in sorted(reports, key=lambda one: one.page):
        count = {level: sum(1 for one in report.claims if one.level == level) for level in Level}
        lines.append(
            f"| [{report.page}]({report.page}) | {len(report.claims)} | {_checked(report)} | {count[Level.HELD]} | "
            f"{count[Level.SEEN_ONCE]} | {count[Level.DID_NOT_HOLD]} |"
        )
    return "\n".join(lines) + "\n"
