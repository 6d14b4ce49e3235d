"""`mhabench check-timing`'s table: each (case, implementation) with both medians, their ratio and the outcome."""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.checks.timing import Outcome, TimingCheck
from mhabench.views.table import TableModel, format_number


def timing_table(checks: Sequence[TimingCheck], threads: int, tolerance: float) -> TableModel:
    cells = [_cells(check) for check in checks]
    return TableModel(
        title=f"mhabench medians vs torch.utils.benchmark.Timer ({threads} threads, ±{tolerance:.0%})",
        headers=["case", "impl", "mhabench ms", "Timer ms", "ratio", "verdict"],
        cells=cells,
        numeric=[False, False, True, True, True, False],
        styles=["failed" if check.outcome in (Outcome.FAIL, Outcome.ERROR) else "" for check in checks],
    )


def agreement_line(checks: Sequence[TimingCheck], tolerance: float) -> str:
    """How many of the lines that ran agree (a call that raised counts as ran and disagreed)."""
    ran = [check for check in checks if check.outcome is not Outcome.NOT_RUN]
    passed = sum(check.outcome is Outcome.PASS for check in ran)
    return f"{passed} of {len(ran)} agree within {tolerance:.0%}"


def _cells(check: TimingCheck) -> list[str]:
    if check.outcome is Outcome.NOT_RUN:
        return [check.case_id, check.impl, "-", "-", "-", f"not run: {check.detail}"]
    if check.outcome is Outcome.ERROR:
        return [check.case_id, check.impl, "-", "-", "-", f"FAIL: {check.detail}"]
    verdict = "PASS" if check.outcome is Outcome.PASS else "FAIL"
    ratio = format_number(check.ratio, ".3f")
    return [
        check.case_id,
        check.impl,
        format_number(check.ours_ms, ".4g"),
        format_number(check.timer_ms, ".4g"),
        ratio,
        verdict,
    ]
