"""One replicate of a replicated run, the process :mod:`mhabench.run.replicates` starts or forks.

``python -m mhabench.cli_replicate CONFIG OUT I/N [--roofline FILE] [--plugin FILE]...``.

A replicate measures and prints nothing, so it imports the runner alone: not the command line's views,
analysis and statistics, which cost a fresh interpreter more than a second on a 2-core machine, once per
replicate. ``--roofline`` hands it the roofs the first replicate measured (the merged run keeps those only).
``mhabench run CONFIG --replicate I/N`` does the same through the full command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mhabench.errors import MhabenchError
from mhabench.history.provenance import code_versions
from mhabench.measure.peaks import DevicePeaks
from mhabench.run import runner
from mhabench.run.replicates import Replicate, parse_replicate
from mhabench.run.request import RunRequest
from mhabench.scenario import loading, plugins
from mhabench.scenario.config import RunConfig


def run_replicate(
    config: RunConfig, out: Path, replicate: Replicate, roofline: dict[str, DevicePeaks] | None = None
) -> None:
    """Measure ``config`` as replicate ``replicate`` into ``out``: its case order, its manifest entries."""
    extra = {"replicate": vars(replicate), "code": code_versions(runner.implementations_of(config))}
    request = RunRequest(
        argv=tuple(sys.argv), case_order_seed=replicate.index, manifest_extra=extra, roofline=roofline or {}
    )
    runner.run(config, out, None, request)


def read_roofline(path: Path) -> dict[str, DevicePeaks]:
    """The ``roofline`` entry of a run's manifest (per dtype, :class:`DevicePeaks`' fields) as the runner takes it."""
    return {dtype: DevicePeaks(**fields) for dtype, fields in json.loads(path.read_text()).items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mhabench.cli_replicate")
    parser.add_argument("config", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("replicate")
    parser.add_argument("--roofline", type=Path)
    parser.add_argument("--plugin", action="append", default=[])
    args = parser.parse_args(argv)
    try:
        for path in args.plugin:
            plugins.load_plugin(Path(path))
        roofline = read_roofline(args.roofline) if args.roofline else None
        run_replicate(loading.load_config(args.config), args.out, parse_replicate(args.replicate), roofline)
    except (MhabenchError, OSError) as exc:  # one line in the replicate's log, which the parent quotes
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code if isinstance(exc, MhabenchError) else 1
    except KeyboardInterrupt:
        print("interrupted: every finished row is already on disk", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
