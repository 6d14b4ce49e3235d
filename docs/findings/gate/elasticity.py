"""How closely a row's speed followed the reference workload between two runs of unchanged code: the evidence
behind ``machine_drift.TRACKING_BAND`` (docs/findings/gate.md#how-far-a-row-follows-the-reference).

    python docs/findings/gate/elasticity.py RUNS_DIR [GATE_RUNS_DIR]

RUNS_DIR holds the stored runs of docs/findings/runs extracted (``for f in docs/findings/runs/*.tar.xz; do tar
-xJf "$f" -C RUNS_DIR; done``). GATE_RUNS_DIR, optional, is a harness folder of a later sitting (``aa/i-base_a``,
``aa/i-base_b``, ``ab/i-base``, ``ab/i-x12``, ``ab/i-x85``), read the same way and printed apart: evidence the band was not
chosen from.

A pair is two runs of the same code, one after the other. For every pair whose reference moved past the
threshold between the runs, and every row of it that ``compare`` would correct by the reference (the row on the
reference's side of the ridge), the elasticity is log(row's raw ratio) / log(reference's ratio): 1 where the row
moved exactly as the reference did, 0 where it did not move. Printed: the quantiles over the rows of the pairs
whose reference moved at most 5 % within each run (those ``compare`` corrects), at most 10 % and 25 %, and over
every pair; then each pair.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from mhabench.analysis.compare import compare_runs
from mhabench.analysis.machine_drift import MachineMove, ReferenceTimings, RowMachine, machine_move, row_state
from mhabench.results.store import Run, load_run

THRESHOLD = 0.05
WITHIN = (THRESHOLD, 0.10, 0.25, math.inf)
"""The quantiles over the pairs whose reference moved at most this much within each run: at the threshold, the
pairs ``compare`` corrects; wider, more pairs whose level is less certain."""
HERE = Path(__file__).resolve().parent
SAME_CODE = {  # each group: (config, run-id stamps in the order they ran), one tree (docs/findings/runs/README.md)
    "default, one process (replication.md)": ("default", "20261127T", "084911 084933 084952 085010 085030"),
    "models-replication, one process": ("models-replication", "20261127T", "085048 085434 085829 090305 090704"),
    "default, 3 processes (replication.md)": ("default", "20261127T", "091136 091343 091637 091927 092222"),
    "models-replication, 3 processes": ("models-replication", "20261127T", "092536 093542 094355 095035 095702"),
    "history-small, unchanged plugin (history.md)": (
        "history-small",
        "20261127T",
        "085511 085530 085555 085630 085717 085744 085802 085817 085840 085918 090020 090122 "
        "090202 090223 090240 090305 090327 090350 090408 090426 090448 090514 090541 090556",
    ),
    "default, 3 processes (b38de99)": ("default", "20261129T", "081724 081820 081915 082016"),
    "default, 3 processes (a0454b4)": ("default", "20261129T", "082439 082501 082528 082552"),
    "default, 3 processes (9a1f108, fast-default.md)": ("default", "20261129T", "111436 111503 111533 111601 111629"),
}


def pairs(runs_dir: Path) -> Iterator[tuple[str, Run, Run, str | None]]:
    """(group, base, candidate, the only implementation unchanged between them or None for all)."""
    for group, (config, day, stamps) in SAME_CODE.items():
        folders = [runs_dir / f"{day}{stamp}Z-{config}" for stamp in stamps.split()]
        for base, candidate in itertools.pairwise(folders):
            yield group, load_run(base), load_run(candidate), None
    for name, sitting, plain in (
        ("gate, first sitting", "runs-first-sitting.tsv", [("runs", "base_a", "base_b", None)]),
        ("gate, first sitting (fused beside a regression)", "runs-first-sitting.tsv", _regressions("runs", "x1", "x4")),
        ("gate, second sitting", "runs.tsv", [("aa", "base_a", "base_b", None)]),
        ("gate, second sitting (fused beside a regression)", "runs.tsv", _regressions("ab", "x15", "x75")),
    ):
        folder_of = dict(line.split("\t") for line in (HERE / sitting).read_text().splitlines())
        yield from _gate_pairs(name, plain, {key: runs_dir / run_id for key, run_id in folder_of.items()}.get)


def _regressions(prefix: str, *names: str) -> list[tuple[str, str, str, str | None]]:
    """The regression runs beside their cycle's base: only ``fused`` is the same code in both."""
    base = "base_b" if prefix == "runs" else "base"
    return [(prefix, base, name, "fused") for name in names]


def _gate_pairs(
    name: str, plain: list[tuple[str, str, str, str | None]], locate: Callable[[str], Path | None]
) -> Iterator[tuple[str, Run, Run, str | None]]:
    for index in range(40):
        for prefix, first, second, impl in plain:
            base, candidate = locate(f"{prefix}/{index}-{first}"), locate(f"{prefix}/{index}-{second}")
            if base is not None and candidate is not None and base.exists() and candidate.exists():
                yield name, load_run(base), load_run(candidate), impl


def later_sitting(out: Path) -> Iterator[tuple[str, Run, Run, str | None]]:
    def locate(key: str) -> Path | None:
        found = sorted((out / key).glob("*/manifest.json"))
        return found[0].parent if found else None

    yield from _gate_pairs(
        "gate, later sitting", [("aa", "base_a", "base_b", None), *_regressions("ab", "x12", "x85")], locate
    )


def levels_only(move: MachineMove) -> MachineMove:
    """The same move with each run's timings cut to their median: the placement rule without the within-run test."""
    base, candidate = (
        ReferenceTimings((side.level_ms,), side.device_type, side.workload) if side is not None else None
        for side in (move.base, move.candidate)
    )
    return MachineMove(base, candidate, move.threshold)


def elasticities(base: Run, candidate: Run, impl: str | None) -> tuple[MachineMove, list[tuple[str, float, float]]]:
    """The move, and (row, raw ratio, elasticity) for each row compare would correct."""
    move = machine_move(base, candidate, THRESHOLD)
    if not move.moved_between:
        return move, []
    raw = compare_runs(base, candidate, threshold=math.inf)  # a machine that never moves past it: nothing corrected
    placed = levels_only(move)
    found = []
    for row in raw.rows.to_dict("records"):
        ratio = float(row.get("ratio", math.nan))
        if (impl is not None and row["impl"] != impl) or not (math.isfinite(ratio) and ratio > 0):
            continue
        if row_state(row, placed) is RowMachine.CORRECTED:
            found.append((f"{row['impl']} {row['case']}", ratio, math.log(ratio) / math.log(move.factor)))
    return move, found


def report(title: str, source: Iterator[tuple[str, Run, Run, str | None]]) -> None:
    found_within: list[tuple[float, float]] = []  # (within-run movement, elasticity)
    lines = []
    for group, base, candidate, impl in source:
        move, found = elasticities(base, candidate, impl)
        if not found:
            continue
        betas = [beta for _, _, beta in found]
        found_within += [(move.within, beta) for beta in betas]
        lines.append(
            f"| {group} | {base.run_id} → {candidate.run_id} | {move.factor - 1:+.0%} | {move.within:.0%} | "
            f"{len(betas)} | {min(betas):.2f} | {float(np.median(betas)):.2f} | {max(betas):.2f} |"
        )
    print(f"## {title}\n")
    for most in WITHIN:
        values = [beta for within, beta in found_within if within <= most]
        name = f"pairs that moved at most {most:.0%} within each run" if math.isfinite(most) else "every pair"
        if values:
            q = np.quantile(values, [0.05, 0.10, 0.25, 0.5])
            print(
                f"{name}: {len(values)} rows; elasticity min {min(values):.2f}, 5 % {q[0]:.2f}, 10 % {q[1]:.2f}, "
                f"25 % {q[2]:.2f}, median {q[3]:.2f}, max {max(values):.2f}"
            )
    print("\n| group | pair | reference between | within | rows | min | median | max |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(lines) + "\n")


if __name__ == "__main__":
    report("stored runs", pairs(Path(sys.argv[1])))
    if len(sys.argv) > 2:
        report("later sitting", later_sitting(Path(sys.argv[2])))
