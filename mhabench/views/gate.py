"""The gate's words: the line ``--fail-on-regression`` ends with, and the note on a run that did not finish."""

from __future__ import annotations

from collections.abc import Sequence

from mhabench.analysis.two_run_gate import GateResult, Outcome
from mhabench.results.completeness import unfinished
from mhabench.results.store import Run


def gate_line(gate: GateResult, on_noise: str) -> str:
    """One line (rich markup) naming the outcome, what it rests on and the exit code it gives."""
    code = gate.exit_code(on_noise)
    if gate.outcome is Outcome.REGRESSION:
        parts = [f"{gate.slower} row(s) slower (whole 95% CI past the threshold)"] if gate.slower else []
        parts += [f"{gate.work_rose} row(s) with counted work risen past the threshold"] if gate.work_rose else []
        return f"[bold red]regression:[/bold red] {'; '.join(parts)} (exit {code})"
    if gate.outcome is Outcome.CANNOT_JUDGE:
        verb = "fails" if on_noise == "fail" else "passes, by --on-noise pass,"
        return (
            f"[bold yellow]cannot judge:[/bold yellow] {gate.cannot_judge} row(s): the machine moved too much to "
            f"judge them, and no regression was found elsewhere; the gate {verb} (exit {code})"
        )
    return f"no regression (exit {code})"


def unfinished_lines(runs: Sequence[Run]) -> list[str]:
    """A line per run that did not complete: its missing cases are missing from the comparison, not unchanged."""
    lines = []
    for run in runs:
        status = unfinished(run)
        if status is not None:
            lines.append(
                f"note: run {run.run_id} is {status}: cases it did not reach are not in this comparison "
                f"(finish it with mhabench run --resume {run.path})"
            )
    return lines
