"""What ``mhabench calibrate`` does with its parsed options: measure (or read) this machine's between-process
spread, show the stored one, or read the spread between devices. The command stays a thin option parser in
:mod:`mhabench.cli`."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.markup import escape

from mhabench import cli_run
from mhabench.cli_shell import console
from mhabench.scenario import loading as config_loading


def calibrate(out: Path, device: str | None, processes: int, from_runs: list[str]) -> None:
    """Measure the spread in ``processes`` fresh processes, or read it across the runs given; store it."""
    from mhabench.analysis.calibration import calibrate as measure_calibration
    from mhabench.analysis.calibration import calibrate_across
    from mhabench.results.store import load_run

    if from_runs:
        found, path = calibrate_across([load_run(ref, out) for ref in from_runs])
    else:
        found, path = measure_calibration(out, sys.argv, device, processes, cli_run.print_replicate)
    console.print(escape(f"{found.describe()}\nstored in {path}"), highlight=False)


def show(device: str | None) -> None:
    """This machine's stored calibration; measures nothing."""
    from mhabench.analysis.calibration import this_machine

    found, path = this_machine(config_loading.check_device_option(device or "auto"))
    console.print(escape(f"{found.describe()}\n{path}"), highlight=False)


def device_spread(out: Path, from_runs: list[str]) -> None:
    """``calibrate --devices``: the calibration sweep on every GPU here, or the runs given, read across devices."""
    from mhabench.analysis.calibration import calibration_config
    from mhabench.analysis.device_spread import device_spread as spread_across
    from mhabench.results.store import load_run
    from mhabench.run.device_sweep import measure_on_devices, visible_devices
    from mhabench.views.device_mix import spread_lines

    if from_runs:
        frames = [load_run(ref, out).frame for ref in from_runs]
    else:
        config = calibration_config(processes=1)
        results = measure_on_devices(
            config, visible_devices(), out, sys.argv, report=lambda line: console.print(escape(line))
        )
        frames = [result.frame for result in results]
    for line in spread_lines(spread_across(frames)):
        console.print(escape(line), highlight=False, soft_wrap=True)
