"""``mhabench check-timing CONFIG``: mhabench's CPU medians against an independent timer, case by case.

A benchmark should agree with someone else's stopwatch. For every (case, implementation) of a config
this times the same call with :func:`mhabench.measure.rounds.time_in_rounds` (warm-up by time, then
blocks) and with ``torch.utils.benchmark.Timer.blocked_autorange``, alternating the two a few times
so that a machine drifting during the check moves both alike, and compares the medians. On CUDA the
headline latency is device time with a cold L2, which no host timer measures: ``make gpu-check``
compares it with ``triton.testing.do_bench`` instead.
"""

from __future__ import annotations

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
from mhabench.views.table import TableModel, format_number

TOLERANCE = 0.05
"""Largest relative gap between the two medians that counts as agreement."""
ALTERNATIONS = 3
"""How many times each timer runs, alternating with the other."""


def check_timing(config: RunConfig, config_path: str = "CONFIG", tolerance: float = TOLERANCE) -> TableModel:
    """One line per (case, implementation): both medians, their ratio and PASS, FAIL, or why it did not run.

    Cases are screened as ``run`` screens them (:func:`mhabench.run.case.screen`; tensor-parallel degrees
    are refused without torchrun); a call that raises is a FAIL line with its one-line error.
    """
    device = resolve_device(config.device)
    if device.type != "cpu":
        raise InputError("check-timing: compares CPU timers; on CUDA run `make gpu-check` (do_bench)")
    cases = expand_cases(config, device)
    check_launch(sorted({case.tensor_parallel for case in cases}), None, config_path)
    apply_process_settings(config.allocator, config.threads)
    cells = []
    for case in cases:
        inputs = None  # drawn once per case, when the first implementation needs it
        for spec in implementations_of(config):
            refused = screen(spec, case, device, config.memory_guard)
            if refused is not None:
                cells.append([case.case_id, spec.name, "-", "-", "-", f"not run: {refused.error}"])
                continue
            try:
                inputs = inputs or make_inputs(case, device)
                _, step = prepare(spec, case, inputs.weights, inputs.x)
                ours_ms, timer_ms = _both_medians_ms(step.run, device, config)
            except Exception as exc:  # the implementation's failure is this line's verdict, not a traceback
                cells.append([case.case_id, spec.name, "-", "-", "-", f"FAIL: {classify_failure(exc)[1]}"])
                continue
            ratio = ours_ms / timer_ms
            verdict = "PASS" if abs(ratio - 1) <= tolerance else "FAIL"
            cells.append(
                [
                    case.case_id,
                    spec.name,
                    format_number(ours_ms, ".4g"),
                    format_number(timer_ms, ".4g"),
                    format_number(ratio, ".3f"),
                    verdict,
                ]
            )
    return TableModel(
        title=f"mhabench medians vs torch.utils.benchmark.Timer ({torch.get_num_threads()} threads, ±{tolerance:.0%})",
        headers=["case", "impl", "mhabench ms", "Timer ms", "ratio", "verdict"],
        cells=cells,
        numeric=[False, False, True, True, True, False],
        styles=["failed" if c[-1].startswith("FAIL") else "" for c in cells],
    )


def _both_medians_ms(call: object, device: torch.device, config: RunConfig) -> tuple[float, float]:
    """Each timer's median of its medians over ``ALTERNATIONS`` alternating runs."""
    timer = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=torch.get_num_threads())
    ours, theirs = [], []
    with torch.inference_mode():
        for _ in range(ALTERNATIONS):
            ours.append(time_in_rounds({"call": call}, device, config.timing, 0)["call"].latency.latency_ms)  # type: ignore[arg-type]
            theirs.append(timer.blocked_autorange(min_run_time=config.timing.min_run_time_s).median * 1e3)
    return statistics.median(ours), statistics.median(theirs)
