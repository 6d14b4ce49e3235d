"""The tables of docs/findings/gate.md from what harness.sh left in OUT_DIR.

    python docs/findings/gate/summarize.py OUT_DIR

For every finished pair: the gate's exit code as ``compare --fail-on-regression`` (the plain two-run pairs) and
``ab --fail-on-regression`` give it, recomputed from the run folders with the code the commands run; the exit code
the timing alone gives (the counted-work gate left out: what time says by itself); the row verdicts; and, for the
plain pairs, what compare said before it read the runs' reference timings (the same pair with them hidden). Writes
OUT_DIR/runs.tsv: the run id in each folder.
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
from mhabench.analysis.compare import Comparison, compare_runs, machine_spread
from mhabench.analysis.two_run_gate import GateResult
from mhabench.analysis.verdict import Change
from mhabench.results.store import Run, load_run

THRESHOLD = 0.05
PLAIN = {  # kind: (folder, base, candidate) under OUT_DIR, the pair's index in front of base and candidate
    "A/A loaded": ("aa", "base_a", "base_b"),
    "A/B x15 idle": ("ab", "base", "x15"),
    "A/B x75 idle": ("ab", "base", "x75"),
}
AB = {"A/A loaded": ("aa", "ab"), "A/B x15 idle": ("ab", "ab-x15"), "A/B x75 idle": ("ab", "ab-x75")}
VERSIONS = [("my_fused", "my_fused@base", "my_fused@candidate")]


def run_in(folder: Path) -> Run | None:
    found = sorted(folder.glob("*/manifest.json")) if folder.is_dir() else []
    return load_run(found[0].parent) if found else None


def unwatched(run: Run) -> Run:
    """The run as compare read it before the reference timings: its manifest without them."""
    manifest = copy.deepcopy(run.manifest)
    manifest.drift = None
    return Run(run.path, manifest, run.rows)


def exit_codes(comparison: Comparison) -> tuple[int, int]:
    """The gate's exit code, and the one the timing alone gives (the work gate left out)."""
    slower, unjudged = len(comparison.regressions), len(comparison.unjudged)
    return (
        GateResult(slower, len(comparison.work_rises), unjudged).exit_code(),
        GateResult(slower, 0, unjudged).exit_code(),
    )


def indices(out: Path, folder: str) -> list[int]:
    return sorted({int(m.group(1)) for p in (out / folder).glob("*") if (m := re.match(r"(\d+)-", p.name))})


def main(out: Path) -> None:
    tallies: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    effects: dict[str, list[Comparison]] = collections.defaultdict(list)
    print("| pair, mode | index | exit | time-only exit | verdicts | ratio(s) | machine (reference) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, (folder, first, second) in PLAIN.items():
        for index in indices(out, folder):
            base, candidate = (run_in(out / folder / f"{index}-{name}") for name in (first, second))
            if base is None or candidate is None:
                continue
            spread = machine_spread([base, candidate])
            record(
                tallies,
                f"{kind}, plain",
                compare_runs(base, candidate, THRESHOLD, between_process_spread=spread),
                index,
            )
            before = compare_runs(unwatched(base), unwatched(candidate), THRESHOLD, between_process_spread=spread)
            record(tallies, f"{kind}, plain before", before, index)
    for kind, (folder, name) in AB.items():
        for index in indices(out, folder):
            run = run_in(out / folder / f"{index}-{name}")
            if run is None or run.manifest.status != "complete":
                continue
            comparison = compare_versions(run.frame, VERSIONS, THRESHOLD, ("base", name))
            record(tallies, f"{kind}, ab", comparison, index)
            effects[kind].append(comparison)
    print()
    for name in sorted(effects):
        print(f"{name}: {describe(effects[name])}")
    for prefix in ("aa", "ab"):
        print(f"load averages (1 min) over the {prefix} commands: {load_range(out, prefix)}")
    print()
    print("| kind, mode | pairs | exit 0 | exit 1 | exit 3 | time-only exit 1 | rows slower | rows faster | rows |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, tally in sorted(tallies.items()):
        print(
            f"| {name} | {tally['pairs']} | {tally['exit 0']} | {tally['exit 1']} | {tally['exit 3']} | "
            f"{tally['time exit 1']} | {tally['slower']} | {tally['faster']} | {tally['rows']} |"
        )
    write_runs(out)


def describe(comparisons: list[Comparison]) -> str:
    """The paired ratio per case (geometric mean over the pairs, and its range), and the counted FLOPs change."""
    frame = pd.concat([c.rows for c in comparisons])
    by_case = frame.groupby("case", sort=False)["ratio"]
    timed = ", ".join(
        f"{case.split()[0]} ×{float(np.exp(np.log(r).mean())):.3f} (×{r.min():.2f}–×{r.max():.2f})"
        for case, r in by_case
    )
    first = comparisons[0].rows
    work = "; ".join(
        f"{case.split()[0]}: " + ", ".join(f"{w.column} {w.relative:+.1%}" for w in changes)
        for case, changes in zip(first["case"], first["work_changes"], strict=True)
        if changes
    )
    return f"{len(comparisons)} ab runs; time {timed}; counted work {work or 'unchanged'}"


def load_range(out: Path, prefix: str) -> str:
    text = "\n".join(
        line for line in (out / "log.tsv").read_text().splitlines() if f"-{prefix}-" in line.split("\t")[0]
    )
    loads = [float(m.group(1)) for m in re.finditer(r"load average: ([0-9.]+),", text)]
    if not loads:
        return "none"
    return f"{min(loads):.2f}–{max(loads):.2f} (median {float(np.median(loads)):.2f}, {len(loads)} readings)"


def record(tallies: dict[str, collections.Counter[str]], name: str, comparison: Comparison, index: int) -> None:
    code, time_code = exit_codes(comparison)
    verdicts = collections.Counter(str(v) for v in comparison.rows["verdict"])
    tally = tallies[name]
    tally.update(pairs=1, rows=len(comparison.rows), **{f"exit {code}": 1})
    tally["time exit 1"] += time_code == 1
    tally["slower"] += verdicts[Change.SLOWER.value]
    tally["faster"] += verdicts[Change.FASTER.value]
    ratios = ", ".join(f"{r:.3f}" for r in comparison.rows["ratio"])
    move = comparison.machine
    machine = f"{move.factor - 1:+.0%} between, {move.within:.0%} within" if move and move.watched else "-"
    print(f"| {name} | {index} | {code} | {time_code} | {dict(verdicts)} | {ratios} | {machine} |")


def write_runs(out: Path) -> None:
    """OUT_DIR/runs.tsv: each harness folder and the run id in it (docs/findings/gate/runs.tsv)."""
    lines = [
        f"{manifest.parent.parent.relative_to(out)}\t{manifest.parent.name}"
        for folder in ("aa", "ab")
        for manifest in sorted((out / folder).glob("*/*/manifest.json"))
    ]
    (out / "runs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
