"""How closely a row's speed followed the reference workload between two runs of unchanged code: the evidence
why ``compare`` no longer corrects rows by the reference (docs/findings/gate.md#how-far-a-row-follows-the-reference).

    python docs/findings/gate/elasticity.py RUNS_DIR

RUNS_DIR holds the stored runs of docs/findings/runs extracted (``for f in docs/findings/runs/*.tar.xz; do tar
-xJf "$f" -C RUNS_DIR; done``).

A pair is two runs of the same code, one after the other. For every pair whose reference moved past the
threshold between the runs, and every row of it on the reference's side of the ridge (compute-bound: the rows
``compare`` once corrected by the reference, placed as it placed them), the elasticity is log(row's raw ratio) /
log(reference's ratio): 1 where the row moved exactly as the reference did, 0 where it did not move. Printed:
the quantiles over the rows of the pairs whose reference moved at most 5 % within each run (those ``compare``
corrected), at most 10 % and 25 %, and over every pair; then each pair. First the stored runs the tracking band
(0.5, 1) was chosen from; then, apart, the gate's third sitting (``runs-third-sitting.tsv``: its A/A pairs and
the unchanged ``fused`` rows beside each regression), which the band was not chosen from.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mhabench.analysis.compare import compare_runs, match_key
from mhabench.analysis.estimate import is_ok, key_of
from mhabench.analysis.machine_drift import MachineMove, machine_move
from mhabench.results.columns import ARITHMETIC_INTENSITY, MEASURED_INTENSITY, PEAK_GBPS, PEAK_TFLOPS, REPEAT
from mhabench.results.store import Run, load_run

THRESHOLD = 0.05
WITHIN = (THRESHOLD, 0.10, 0.25, math.inf)
"""The quantiles over the pairs whose reference moved at most this much within each run: at the threshold, the
pairs ``compare`` corrected; wider, more pairs whose level is less certain."""
REFERENCE_INTENSITY = 2 * 512**3 / (3 * 512**2 * 4)
"""FLOP/B of the CPU reference, a 512×512 float32 matmul (``mhabench/measure/drift.py``): 2·s³ FLOPs over three
s×s operands."""
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


def third_sitting(runs_dir: Path) -> Iterator[tuple[str, Run, Run, str | None]]:
    folder_of = dict(line.split("\t") for line in (HERE / "runs-third-sitting.tsv").read_text().splitlines())
    plain = [("aa", "base_a", "base_b", None), *_regressions("ab", "x12", "x85")]
    yield from _gate_pairs("gate, third sitting", plain, {k: runs_dir / v for k, v in folder_of.items()}.get)


def compute_bound(frame: pd.DataFrame, key: list[str]) -> dict[tuple[Any, ...], bool]:
    """Per case key, whether its first ok row lies on the reference's side of its ridge, as compare placed rows
    when it corrected them: the intensity (counted, else modelled) against peak TFLOP/s ÷ peak GB/s, else the
    recorded ``roofline_bound``."""
    placed: dict[tuple[Any, ...], bool] = {}
    for record in frame.to_dict("records"):
        found = key_of(record, key)
        if found in placed or not is_ok(record):
            continue
        counted, modelled = (_number(record.get(column)) for column in (MEASURED_INTENSITY, ARITHMETIC_INTENSITY))
        intensity = counted if counted > 0 else modelled
        tflops, gbps = _number(record.get(PEAK_TFLOPS)), _number(record.get(PEAK_GBPS))
        ridge = tflops * 1e3 / gbps if gbps > 0 else math.nan
        if intensity > 0 and ridge > 0:
            placed[found] = (intensity >= ridge) == (ridge <= REFERENCE_INTENSITY)
        else:
            placed[found] = str(record.get("roofline_bound") or "") == "compute"
    return placed


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def elasticities(base: Run, candidate: Run, impl: str | None) -> tuple[MachineMove, list[tuple[str, float, float]]]:
    """The move, and (row, raw ratio, elasticity) for each compute-bound row."""
    move = machine_move(base, candidate, THRESHOLD)
    if not move.moved_between:
        return move, []
    raw = compare_runs(base, candidate, threshold=math.inf)  # a machine that never moves past it: every row judged
    key = match_key(base.frame, candidate.frame)
    if base.manifest.replicated or candidate.manifest.replicated:  # compare reads these across processes
        key = [column for column in key if column != REPEAT]
    placed = compute_bound(base.frame, key)
    found = []
    for row in raw.rows.to_dict("records"):
        ratio = float(row.get("ratio", math.nan))
        if (impl is not None and row["impl"] != impl) or not (math.isfinite(ratio) and ratio > 0):
            continue
        if placed.get(key_of(row, key), False):
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
    report("third sitting", third_sitting(Path(sys.argv[1])))
