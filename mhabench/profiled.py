"""``python -m mhabench.profiled STATS_FILE ARGS...``: ``mhabench ARGS...`` under cProfile.

``python -m cProfile`` swallows ``SystemExit``, so a failed run would exit 0; this keeps the exit
status, writes the statistics to ``STATS_FILE`` and prints the mhabench functions that took the
most cumulative time (``make gpu-sweep PROFILE=1``: where a slow sweep spends its time).
"""

from __future__ import annotations

import cProfile
import pstats
import sys

from mhabench.cli import main

TOP_FUNCTIONS = 30


def profiled(stats_file: str, args: list[str]) -> None:
    """Run the CLI with ``args``; the statistics are written and printed however it ends."""
    sys.argv = ["mhabench", *args]
    profiler = cProfile.Profile()
    try:
        profiler.runcall(main)
    finally:
        profiler.dump_stats(stats_file)
        pstats.Stats(stats_file).sort_stats("cumulative").print_stats("mhabench/", TOP_FUNCTIONS)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m mhabench.profiled STATS_FILE [mhabench arguments...]")
    profiled(sys.argv[1], sys.argv[2:])
