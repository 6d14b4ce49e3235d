"""A run's answers: its cases and the pick of each, computed once and read by every other rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mhabench.analysis.advice.cases import MeasuredCase, cases_of
from mhabench.analysis.advice.pick import Pick, pick
from mhabench.analysis.advice.replicated import is_replicated, pick_replicated
from mhabench.results.store import Run


@dataclasses.dataclass(frozen=True)
class RunAnswers:
    """One run read for advice: its cases in run order and their picks by case_id."""

    run: Run
    cases: Sequence[MeasuredCase]
    picks: Mapping[str, Pick]

    @property
    def environment(self) -> Mapping[str, Any]:
        return self.run.manifest.environment

    def device(self) -> str:
        """``NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130)``: what a reader calls the machine."""
        environment = self.environment
        name = environment.get("device_name") or environment.get("device_kind") or "an unknown device"
        return f"{name} (torch {environment.get('torch', '?')})"


def answer(run: Run) -> RunAnswers:
    """The run's cases and picks: across processes for a replicated run, per repeat otherwise."""
    cases = cases_of(run.run_id, run.frame)
    pick_of = pick_replicated if is_replicated(run.manifest) else pick
    return RunAnswers(run, cases, {case.case_id: pick_of(case) for case in cases})
