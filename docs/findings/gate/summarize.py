"""The tables of docs/findings/gate.md from what harness.sh left in OUT_DIR.

    .venv/bin/python docs/findings/gate/summarize.py OUT_DIR

For every finished pair: the gate's exit code (``compare --fail-on-regression`` for the plain two-run pairs,
recomputed here from the run folders; ``ab --fail-on-regression`` as the harness logged it, and recomputed), the
row verdicts, and what plain compare said before it read the reference timings (the same pair with them hidden).
"""

from __future__ import annotations

import collections
import copy
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from mhabench.analysis.ab import compare_versions
from mhabench.analysis.compare import Comparison, compare_runs
from mhabench.analysis.two_run_gate import GateResult
from mhabench.analysis.verdict import Change
from mhabench.results.store import Run, load_run

THRESHOLD = 0.05
PAIRS = {"A/A": ("base_a", "base_b"), "A/B +1": ("base_a", "x1"), "A/B +4": ("base_b", "x4")}
AB = {"A/A": "x0", "A/B +1": "x1", "A/B +4": "x4"}
VERSIONS = [("my_fused", "my_fused@base", "my_fused@candidate")]


def run_in(folder: Path) -> Run | None:
    found = sorted(folder.glob("*/manifest.json")) if folder.is_dir() else []
    return load_run(found[0].parent) if found else None


def unwatched(run: Run) -> Run:
    """The run as compare read it before the reference timings: its manifest without them."""
    manifest = copy.deepcopy(run.manifest)
    manifest.drift = None
    return Run(run.path, manifest, run.rows)


def gate(comparison: Comparison) -> GateResult:
    return GateResult(len(comparison.regressions), len(comparison.work_rises), len(comparison.unjudged))


def gate_without_work(comparison: Comparison) -> int:
    """The exit code the timing alone gives (the work gate left out): what time says by itself."""
    return GateResult(len(comparison.regressions), 0, len(comparison.unjudged)).exit_code()


def main(out: Path) -> None:
    cycles = sorted({int(m.group(1)) for p in out.glob("runs/*") if (m := re.match(r"(\d+)-", p.name))})
    tallies: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    effects: dict[str, list[Comparison]] = collections.defaultdict(list)
    print("| pair, mode | cycle | exit | time-only exit | verdicts | ratio(s) | machine (reference) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for cycle in cycles:
        for kind, (first, second) in PAIRS.items():
            base, candidate = run_in(out / "runs" / f"{cycle}-{first}"), run_in(out / "runs" / f"{cycle}-{second}")
            if base is None or candidate is None:
                continue
            now = compare_runs(base, candidate, THRESHOLD)
            before = compare_runs(unwatched(base), unwatched(candidate), THRESHOLD)
            record(tallies, f"{kind} plain", now, cycle)
            record(tallies, f"{kind} plain, before", before, cycle)
        for kind, extra in AB.items():
            run = run_in(out / "ab" / f"{cycle}-{extra}")
            if run is None or run.manifest.status != "complete":
                continue
            comparison = compare_versions(run.frame, VERSIONS, THRESHOLD, ("base", extra))
            record(tallies, f"{kind} ab", comparison, cycle)
            effects[kind].append(comparison)
    print()
    for name in sorted(effects):
        print(f"{name}: {describe(effects[name])}")
    print(f"load averages (1 min) over the commands: {load_range(out)}")
    print()
    print("| kind, mode | pairs | exit 0 | exit 1 | exit 3 | time-only exit 1 | rows slower | rows faster | rows |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, tally in sorted(tallies.items()):
        print(
            f"| {name} | {tally['pairs']} | {tally['exit 0']} | {tally['exit 1']} | {tally['exit 3']} | "
            f"{tally['time exit 1']} | {tally['slower']} | {tally['faster']} | {tally['rows']} |"
        )


def describe(comparisons: list[Comparison]) -> str:
    """The paired ratio per case, geometric mean over the cycles, and one cycle's counted FLOPs change per case."""
    frame = pd.concat([c.rows for c in comparisons])
    ratios = frame.groupby("case", sort=False)["ratio"].apply(lambda r: float(np.exp(np.log(r).mean())))
    first = comparisons[0].rows
    work = [
        f"{case}: " + ", ".join(f"{w.column} {w.base:.0f} → {w.candidate:.0f} ({w.relative:+.1%})" for w in changes)
        for case, changes in zip(first["case"], first["work_changes"], strict=True)
    ]
    timed = ", ".join(f"{case} ×{ratio:.2f}" for case, ratio in ratios.items())
    return f"{len(comparisons)} ab runs; time {timed}; counted work {'; '.join(work) or 'unchanged'}"


def load_range(out: Path) -> str:
    loads = [float(m.group(1)) for m in re.finditer(r"load average: ([0-9.]+),", (out / "log.tsv").read_text())]
    return f"{min(loads):.2f}–{max(loads):.2f} (median {float(np.median(loads)):.2f}, {len(loads)} readings)"


def record(tallies: dict[str, collections.Counter[str]], name: str, comparison: Comparison, cycle: int) -> None:
    result = gate(comparison)
    code, time_code = result.exit_code(), gate_without_work(comparison)
    verdicts = collections.Counter(str(v) for v in comparison.rows["verdict"])
    tally = tallies[name]
    tally.update(pairs=1, rows=len(comparison.rows), **{f"exit {code}": 1})
    tally["time exit 1"] += time_code == 1
    tally["slower"] += verdicts[Change.SLOWER.value]
    tally["faster"] += verdicts[Change.FASTER.value]
    ratios = ", ".join(f"{r:.2f}" for r in comparison.rows["ratio"])
    move = comparison.machine
    machine = f"{move.factor - 1:+.0%} between, {move.within:.0%} within" if move and move.watched else "-"
    print(f"| {name} | {cycle} | {code} | {time_code} | {dict(verdicts)} | {ratios} | {machine} |")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
