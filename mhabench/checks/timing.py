"""``mhabench check-timing CONFIG``: mhabench's CPU medians against an independent timer, case by case.

A benchmark should agree with someone else's stopwatch. For every (case, implementation) of a config
this times the same call with :func:`mhabench.measure.rounds.time_in_rounds` (warm-up by time, then
blocks) and with ``torch.utils.benchmark.Timer.blocked_autorange``, alternating the two a few times
so that a machine drifting during the check moves both alike, and compares the medians. On CUDA the
headline latency is device time with a cold L2, which no host timer measures: ``make gpu-check``
compares it with ``triton.testing.do_bench`` instead.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics

import torch
from torch.utils import benchmark

from mhabench.errors import InputError
from mhabench.measure.allocator import apply_process_settings
from mhabench.measure.rounds import time_in_rounds
from mhabench.run.case import screen
from mhabench.run.inputs import make_inputs
from mhabench.run.launch import check_launch
from mhabench.run.runner import implementations_of
from mhabench.run.steps import prepare
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device
from mhabench.torch_errors import classify_failure

TOLERANCE = 0.05
"""Largest relative gap between the two medians that counts as agreement."""
ALTERNATIONS = 3
"""How many times each timer runs, alternating with the other."""


class Outcome(str, enum.Enum):
    """How one (case, implementation) line of the check ended."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    NOT_RUN = "not run"

    __str__ = str.__str__


@dataclasses.dataclass(frozen=True)
class TimingCheck:
    """Both medians of one (case, implementation) and the outcome; ``detail`` is the error when it did not time."""

    case_id: str
    impl: str
    outcome: Outcome
    ours_ms: float = math.nan
    timer_ms: float = math.nan
    detail: str = ""

    @property
    def ratio(self) -> float:
        return self.ours_ms / self.timer_ms


def check_timing(config: RunConfig, config_path: str = "CONFIG", tolerance: float = TOLERANCE) -> list[TimingCheck]:
    """One record per (case, implementation): both medians and PASS or FAIL, or why it did not time.

    Cases are screened as ``run`` screens them (:func:`mhabench.run.case.screen`; tensor-parallel degrees
    are refused without torchrun); a call that raises is an ERROR record with its one-line error.
    """
    device = resolve_device(config.device)
    if device.type != "cpu":
        raise InputError("check-timing: compares CPU timers; on CUDA run `make gpu-check` (do_bench)")
    cases = expand_cases(config, device)
    check_launch(sorted({case.tensor_parallel for case in cases}), None, config_path)
    apply_process_settings(config.allocator, config.threads)
    checks = []
    for case in cases:
        inputs = None  # drawn once per case, when the first implementation needs it
        for spec in implementations_of(config):
            refused = screen(spec, case, device, config.memory_guard)
            if refused is not None:
                checks.append(TimingCheck(case.case_id, spec.name, Outcome.NOT_RUN, detail=refused.error))
                continue
            try:
                inputs = inputs or make_inputs(case, device)
                _, step = prepare(spec, case, inputs.weights, inputs.x)
                ours_ms, timer_ms = _both_medians_ms(step.run, device, config)
            except Exception as exc:  # the implementation's failure is this line's outcome, not a traceback
                checks.append(TimingCheck(case.case_id, spec.name, Outcome.ERROR, detail=classify_failure(exc)[1]))
                continue
            agrees = abs(ours_ms / timer_ms - 1) <= tolerance
            checks.append(
                TimingCheck(case.case_id, spec.name, Outcome.PASS if agrees else Outcome.FAIL, ours_ms, timer_ms)
            )
    return checks


def _both_medians_ms(call: object, device: torch.device, config: RunConfig) -> tuple[float, float]:
    """Each timer's median of its medians over ``ALTERNATIONS`` alternating runs."""
    timer = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=torch.get_num_threads())
    ours, theirs = [], []
    with torch.inference_mode():
        for _ in range(ALTERNATIONS):
            ours.append(time_in_rounds({"call": call}, device, config.timing, 0)["call"].latency.latency_ms)  # type: ignore[arg-type]
            theirs.append(timer.blocked_autorange(min_run_time=config.timing.min_run_time_s).median * 1e3)
    return statistics.median(ours), statistics.median(theirs)
