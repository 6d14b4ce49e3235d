"""The tables of docs/findings/gate.md from what harness.sh left in OUT_DIR.

    python docs/findings/gate/summarize.py OUT_DIR
    python docs/findings/gate/summarize.py RUNS_TSV RUNS_DIR [LOG_TSV]

The first form reads a harness folder; the second a stored sitting: RUNS_TSV maps each harness folder to its run
id (docs/findings/gate/runs*.tsv), RUNS_DIR holds those runs extracted from docs/findings/runs, LOG_TSV is the
sitting's log (load averages). The first sitting's layout (``runs/i-base_a``, ``runs/i-base_b``, and its A/A
``ab`` run ``ab/i-x0``) is read for its A/A pairs.

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
AA_PLAIN = ("base_a", "base_b")
VERSIONS = [("my_fused", "my_fused@base", "my_fused@candidate")]
REGRESSION = re.compile(r"^(\d+)-(x\d+)$")


class Sitting:
    """The run folders of one sitting, by harness folder (``aa/3-base_a``): a harness folder, or a stored map."""

    def __init__(self, source: Path, runs_dir: Path | None = None, log: Path | None = None) -> None:
        if runs_dir is None:
            found = {
                str(manifest.parent.parent.relative_to(source)): manifest.parent
                for manifest in source.glob("*/*/*/manifest.json")
            }
            self.log = source / "log.tsv"
        else:
            lines = source.read_text().splitlines()
            found = {key: runs_dir / run_id for key, run_id in (line.split("\t") for line in lines)}
            self.log = log
        self.folders = found
        self.first = any(key.startswith("runs/") for key in found)
        """The first sitting's layout: its plain pairs under runs/, its `ab` runs ab/i-x0 (A/A), x1 and x4."""

    @property
    def aa_plain(self) -> str:
        return "runs" if self.first else "aa"

    @property
    def aa_ab(self) -> tuple[str, str]:
        return ("ab", "x0") if self.first else ("aa", "ab")

    def run(self, key: str) -> Run | None:
        folder = self.folders.get(key)
        return load_run(folder) if folder is not None and (folder / "manifest.json").exists() else None

    def indices(self, prefix: str) -> list[int]:
        return sorted({int(key.split("/")[1].split("-")[0]) for key in self.folders if key.startswith(f"{prefix}/")})

    def regressions(self) -> list[str]:
        """The regression names of the idle A/B cycles (``x15``, ``x75``; ``x12``, ``x85``; none in the first)."""
        if self.first:
            return []
        return sorted(
            {m.group(2) for key in self.folders if key.startswith("ab/") and (m := REGRESSION.match(key[3:]))}
        )


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


def main(sitting: Sitting) -> None:
    tallies: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    effects: dict[str, list[Comparison]] = collections.defaultdict(list)
    print("| pair, mode | index | exit | time-only exit | verdicts | ratio(s) | machine (reference) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    plain = [("A/A loaded", sitting.aa_plain, AA_PLAIN)]
    plain += [(f"A/B {name} idle", "ab", ("base", name)) for name in sitting.regressions()]
    for kind, prefix, (first, second) in plain:
        for index in sitting.indices(prefix):
            base, candidate = (sitting.run(f"{prefix}/{index}-{name}") for name in (first, second))
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
    versions = [("A/A loaded", *sitting.aa_ab)]
    versions += [(f"A/B {name} idle", "ab", f"ab-{name}") for name in sitting.regressions()]
    for kind, prefix, name in versions:
        for index in sitting.indices(prefix):
            run = sitting.run(f"{prefix}/{index}-{name}")
            if run is None or run.manifest.status != "complete":
                continue
            comparison = compare_versions(run.frame, VERSIONS, THRESHOLD, ("base", name))
            record(tallies, f"{kind}, ab", comparison, index)
            effects[kind].append(comparison)
    print()
    for name in sorted(effects):
        print(f"{name}: {describe(effects[name])}")
    for prefix in ("aa", "ab"):
        print(f"load averages (1 min) over the {prefix} commands: {load_range(sitting.log, prefix)}")
    print()
    print("| kind, mode | pairs | exit 0 | exit 1 | exit 3 | time-only exit 1 | rows slower | rows faster | rows |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, tally in sorted(tallies.items()):
        print(
            f"| {name} | {tally['pairs']} | {tally['exit 0']} | {tally['exit 1']} | {tally['exit 3']} | "
            f"{tally['time exit 1']} | {tally['slower']} | {tally['faster']} | {tally['rows']} |"
        )


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


def load_range(log: Path | None, prefix: str) -> str:
    if log is None or not log.exists():
        return "no log"
    text = "\n".join(line for line in log.read_text().splitlines() if f"-{prefix}-" in line.split("\t")[0])
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
    """OUT_DIR/runs.tsv: each harness folder and the run id in it (docs/findings/gate/runs*.tsv)."""
    lines = [
        f"{manifest.parent.parent.relative_to(out)}\t{manifest.parent.name}"
        for folder in ("aa", "ab")
        for manifest in sorted((out / folder).glob("*/*/manifest.json"))
    ]
    (out / "runs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) == 2:
        main(Sitting(Path(sys.argv[1])))
        write_runs(Path(sys.argv[1]))
    else:
        main(Sitting(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None))
