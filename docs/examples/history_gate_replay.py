"""Replay ``mhabench history --gate`` on the stores docs/findings/history.md measured (its false-alarm table).

    python docs/examples/history_gate_replay.py snapshots WORK/snapshots   # the gate after each of N runs
    python docs/examples/history_gate_replay.py commits WORK/history        # the gate after each commit

``snapshots``: each ``N.sqlite`` is the store as it was after run N (history_false_alarms.sh copies it); the
newest point of each is judged at several thresholds and spread factors, and the runs on which the gate
would have fired are listed. ``commits``: one store, judged as it was after each plugin commit in turn.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from mhabench.history import gate, series, store

THRESHOLDS = (0.0, 0.01, 0.02, 0.05, 0.10, 0.20)
SPREAD_FACTORS = (0.0, 1.0, 2.0)


def snapshots(folder: Path) -> None:
    alarms: dict[tuple[float, float], list[int]] = {(t, k): [] for t in THRESHOLDS for k in SPREAD_FACTORS}
    gated = 0
    for snapshot in sorted(folder.glob("*.sqlite"), key=lambda path: int(path.stem)):
        directory = Path(tempfile.mkdtemp())
        shutil.copy(snapshot, directory / store.STORE_NAME)
        runs, rows = store.read(directory)
        for threshold in THRESHOLDS:
            history = series.build(runs, rows, series.METRICS["ratio"], threshold)
            for factor in SPREAD_FACTORS:
                results = [gate.judge_newest(one, threshold, True, factor) for one in history.series]
                if any(result.regression for result in results):
                    alarms[(threshold, factor)].append(int(snapshot.stem))
        default = gate.gate(series.build(runs, rows, series.METRICS["ratio"], gate.DEFAULT_THRESHOLD))
        gated += any(result.change is not None for result in default)
        print(f"run {snapshot.stem}: " + "; ".join(r.message(gate.DEFAULT_THRESHOLD) for r in default))
        shutil.rmtree(directory)
    print(f"gated runs: {gated}")
    print("| threshold | spread factor 0 | spread factor 1 | spread factor 2 |\n| ---: | ---: | ---: | ---: |")
    for threshold in THRESHOLDS:
        cells = [f"{len(alarms[(threshold, k)])} {alarms[(threshold, k)] or ''}".strip() for k in SPREAD_FACTORS]
        print(f"| {threshold:.0%} | " + " | ".join(cells) + " |")


def commits(directory: Path) -> None:
    runs, rows = store.read(directory)
    timed = rows[rows["impl"] != rows["baseline"]]
    order = timed.groupby("commit")["commit_time"].min().sort_values().index.tolist()
    for count in range(1, len(order) + 1):
        kept = set(timed[timed["commit"].isin(order[:count])]["run_id"])
        history = series.build(
            runs[runs["run_id"].isin(kept)], rows[rows["run_id"].isin(kept)], series.METRICS["ratio"], 0.05
        )
        for result in gate.gate(history):
            exit_code = 1 if result.regression else 0
            print(f"after {order[count - 1][:7]}: exit {exit_code}: {result.message(gate.DEFAULT_THRESHOLD)}")


if __name__ == "__main__":
    {"snapshots": snapshots, "commits": commits}[sys.argv[1]](Path(sys.argv[2]))
