"""``python -m mhabench.checks.evidence ARCHIVE``: each open GPU question of docs/gpu.md, answered from the archive.

``make gpu-evidence`` writes one archive (:mod:`mhabench.checks.evidence_run`); this reads it anywhere, with no GPU,
and prints one line per question: the figure, the target, and PASS (the figure meets the target), SHORT (the step
ran and the figure misses, or is not there) or NOT RUN (the step that answers it did not run, with the plan's
reason). The figures are read from what the steps wrote (gpu_check.json, run folders' results.csv and manifest,
plan.json's wall times, the stored calibration), never from their printed sentences.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from mhabench.checks.evidence_estimates import ENERGY_WINDOWS
from mhabench.checks.evidence_plan import ARCHIVE_ROOT, PLAN
from mhabench.results.energy import COUNTER_STEP_S, POWER_LIMIT_MARGIN, power_limit_of, reading
from mhabench.scenario.config import EnergyConfig

PASS, SHORT, NOT_RUN = "PASS", "SHORT", "NOT RUN"
SWEEP_AIM_S = 100.0
COUNTERS_SWEEP_AIM_S = 300.0
SPREAD_AIM, SPREAD_AIM_LONG = 0.05, 0.02
LONG_SEQ = 4096
REPLAY_TOLERANCE = 0.03
COPY_TOLERANCE = 0.05
ENERGY_UNCERTAINTY_AIM = 0.05
REPLAY_CASE = {"batch": 1, "seq_len": 4096, "d_model": 4096, "causal": False}
SWEEPS = ("sweep1", "sweep2", "sweep3")


@dataclasses.dataclass(frozen=True)
class Answer:
    question: str
    figure: str
    target: str
    verdict: str


class NotRun(Exception):
    """The step behind a question did not run (or left nothing): the message says which and why."""


class CutShort(Exception):
    """The step behind a question was cut at the budget: it ran, and its figure is that it did not finish."""


@dataclasses.dataclass(frozen=True)
class Evidence:
    """The unpacked work folder of one ``make gpu-evidence``."""

    root: Path

    @property
    def plan(self) -> dict[str, Any]:
        return json.loads((self.root / PLAN).read_text(encoding="utf-8"))

    def step(self, name: str) -> dict[str, Any]:
        """The step's record; NotRun unless it finished (done, or failed with what it wrote kept)."""
        found = next((s for s in self.plan["steps"] if s["name"] == name), None)
        if found is None or found["status"] in ("skipped", "not run"):
            reason = found["reason"] if found else "not in the plan"
            raise NotRun(f"{name} {found['status'] if found else 'absent'}: {reason}")
        return found

    def wall_s(self, name: str) -> float:
        """The step's wall time; a failed step (a check or a row failed) still took it, a cut one did not finish."""
        step = self.step(name)
        if step["status"] not in ("done", "failed"):
            raise CutShort(f"{name} {step['status']}: {step['reason']}")
        return float(step["actual_s"])

    def check(self, name: str) -> dict[str, Any]:
        self.step("checks")
        path = self.root / "checks" / "gpu_check.json"
        if not path.is_file():
            raise NotRun("checks wrote no gpu_check.json")
        found = next((c for c in json.loads(path.read_text(encoding="utf-8"))["checks"] if c["name"] == name), None)
        if found is None or found["status"] == "SKIP":
            raise NotRun(f"check {name}: {found.get('reason', 'skipped') if found else 'not in gpu_check.json'}")
        return found

    def run(self, name: str) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The rows and manifest of the run folder a step wrote."""
        step = self.step(name)
        manifests = sorted((self.root / name).glob("*/manifest.json"))
        if not manifests or not (manifests[-1].parent / "results.csv").is_file():
            raise NotRun(
                f"{name} {step['status']} (exit {step['returncode']}) and wrote no run folder with results.csv"
            )
        folder = manifests[-1].parent
        rows = pd.read_csv(folder / "results.csv", keep_default_na=False, na_values=[""])
        return rows, json.loads(manifests[-1].read_text(encoding="utf-8"))


def _ok(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["status"] == "ok"]


def energy_check(ev: Evidence) -> Answer:
    c = ev.check("energy")
    power, limit, seconds = c.get("average_power_w"), c.get("power_limit_w"), c.get("seconds")
    if power is None or limit is None or seconds is None:
        return Answer("energy", f"{c['status']}: {c.get('reason', 'no window')}", "", SHORT)
    step = f", counter step {c['counter_step_s']:.2f} s" if c.get("counter_step_s") is not None else ""
    ok = seconds >= 5 and 0.5 * limit <= power <= POWER_LIMIT_MARGIN * limit
    figure = f"{power:.0f} W of a {limit:.0f} W limit over {seconds:.2f} s{step}"
    return Answer("energy", figure, "≥ half the limit over ≥ 5 s", PASS if ok else SHORT)


def dram_copy(ev: Evidence) -> Answer:
    c = ev.check("dram_copy")
    ratio = float(c.get("dram_over_2x", math.nan))
    ok = abs(ratio - 1) <= COPY_TOLERANCE
    return Answer("dram_copy", f"DRAM bytes / 2 × copy size {ratio:.3f}", "within 5 % of 1", PASS if ok else SHORT)


def range_flops(ev: Evidence) -> Answer:
    c = ev.check("fused_hardware_flops")
    source, ratio = str(c.get("source", "")), float(c.get("ratio", math.nan))
    ok = c["status"] == "PASS" and "range replay" in source
    figure = f"tensor FLOPs / model {ratio:.4f} ({source or 'no source'})"
    return Answer("fused_hardware_flops", figure, "= 1 through range replay", PASS if ok else SHORT)


def fp8_check(ev: Evidence) -> Answer:
    c = ev.check("fp8_attention")
    runs = c.get("runs", {})
    parts = [
        f"{name}: {run['speedup']:.2f}× fused, err median {run['error']['median']:.2g} p99 {run['error']['p99']:.2g} "
        f"max {run['error']['max']:.2g} rms {run['error']['rms']:.2g}"
        for name, run in runs.items()
    ]
    figure = "; ".join(parts) or f"{c['status']}: {c.get('reason', c.get('exception', ''))}"
    return Answer("fp8_attention", figure, "passes 0.177, faster than fused", PASS if c["status"] == "PASS" else SHORT)


def sweep_wall(ev: Evidence) -> Answer:
    wall = ev.wall_s("sweep1")
    rows, manifest = ev.run("sweep1")
    ok = _ok(rows)
    least = manifest["config"]["timing"]["min_samples"]
    full = int((ok["samples"] >= least).sum())
    figure = f"{wall:.1f} s wall, {full} of {len(ok)} ok rows at ≥ {least} samples"
    good = wall < SWEEP_AIM_S and full == len(ok) and len(ok) > 0
    return Answer("default sweep wall time", figure, f"< {SWEEP_AIM_S:.0f} s, every ok row", PASS if good else SHORT)


def counters_range(ev: Evidence) -> Answer:
    rows, _ = ev.run("counters_range")
    ok = _ok(rows)
    ranged = int(ok["counters_source"].fillna("").str.contains("range replay").sum())
    figure = f"{ranged} of {len(ok)} ok rows counted by range replay"
    return Answer("counters by range replay", figure, "every ok row", PASS if ranged == len(ok) > 0 else SHORT)


def counters_cost(ev: Evidence) -> Answer:
    rows, _ = ev.run("counters_range")
    per_row = (ev.wall_s("counters_range") - ev.wall_s("subset")) / max(len(_ok(rows)), 1)
    sweep_rows, _ = ev.run("sweep1")
    sweep_s = ev.wall_s("sweep1") + per_row * len(_ok(sweep_rows))
    figure = f"{per_row:.1f} s a row; default sweep with counters ≈ {sweep_s:.0f} s"
    aim = f"sweep < {COUNTERS_SWEEP_AIM_S:.0f} s"
    return Answer("counters' cost per row", figure, aim, PASS if sweep_s < COUNTERS_SWEEP_AIM_S else SHORT)


def _replay_case(rows: pd.DataFrame) -> pd.DataFrame:
    ok = _ok(rows)
    for column, value in REPLAY_CASE.items():
        ok = ok[ok[column].astype(str) == str(value)]
    return ok.assign(dram_bytes=ok["dram_read_bytes"].astype(float) + ok["dram_write_bytes"].astype(float))


def replay_bytes(ev: Evidence) -> Answer:
    ranged = _replay_case(ev.run("counters_range")[0]).set_index("impl")["dram_bytes"]
    kernel = _replay_case(ev.run("counters_kernel")[0]).set_index("impl")["dram_bytes"]
    shared = [impl for impl in ("fused", "naive") if impl in ranged.index and impl in kernel.index]
    if not shared:
        return Answer("range vs kernel replay bytes", "no fused/naive row in both runs", "within 3 %", SHORT)
    gaps = {impl: ranged[impl] / kernel[impl] - 1 for impl in shared}
    figure = "; ".join(
        f"{i}: {ranged[i] / 1e9:.3g} GB range, {kernel[i] / 1e9:.3g} GB kernel ({g:+.1%})" for i, g in gaps.items()
    )
    ok = all(abs(g) <= REPLAY_TOLERANCE for g in gaps.values()) and len(shared) == 2
    return Answer("range vs kernel replay bytes", figure, "within 3 %", PASS if ok else SHORT)


def energy_rows(ev: Evidence) -> Answer:
    rows, manifest = ev.run("energy")
    limit = power_limit_of(manifest.get("environment", {}))
    ok = _ok(rows)
    readings = [reading(record, limit) for record in ok.to_dict("records")]
    resolved = [r for r in readings if r.resolved]
    uncertainty = max((r.uncertainty or math.nan for r in resolved), default=math.nan)
    spreads = ok["energy_spread"].astype(float) if "energy_spread" in ok else pd.Series(dtype=float)
    spread = float(spreads.max()) if len(spreads) else math.nan
    figure = f"{len(resolved)} of {len(ok)} ok rows resolved, uncertainty ≤ {uncertainty:.1%}, spread ≤ {spread:.1%}"
    if resolved:
        figure += f", power ≤ {max(r.average_power_w or 0 for r in resolved):.0f} W of {limit or math.nan:.0f} W"
    good = len(resolved) == len(ok) > 0 and uncertainty <= ENERGY_UNCERTAINTY_AIM and spread <= uncertainty
    return Answer("energy per call", figure, "every ok row, ~5 %, spread under it, ≤ limit", PASS if good else SHORT)


def energy_cost(ev: Evidence) -> Answer:
    rows, _ = ev.run("energy")
    windows = max(len(_ok(rows)), 1) * ENERGY_WINDOWS
    per_window = (ev.wall_s("energy") - ev.wall_s("subset")) / windows
    aim = EnergyConfig().window_s + 2 * COUNTER_STEP_S
    figure = f"{per_window:.2f} s a window ({windows} windows)"
    return Answer("energy windows' cost", figure, f"≤ {aim:.1f} s a window", PASS if per_window <= aim else SHORT)


def fp8_rows(ev: Evidence) -> Answer:
    rows, _ = ev.run("fp8")
    fp8 = rows[rows["impl"] == "fused_fp8"]
    ok = _ok(fp8)
    fused = _ok(rows[rows["impl"] == "fused"]).set_index("case_id")["latency_ms"].astype(float)
    speedups = {r.case_id: fused[r.case_id] / float(r.latency_ms) for r in ok.itertuples() if r.case_id in fused.index}
    roofs = ok["roofline_source"].fillna("").str.endswith("(fp8 tensor rate)").all() if len(ok) else False
    errors = ok["max_rel_err"].astype(float)
    figure = (
        f"{len(ok)} of {len(fp8)} fused_fp8 rows ok; speedup over fused "
        + ", ".join(f"{s:.2f}×" for s in speedups.values())
        + (f"; max_rel_err ≤ {errors.max():.3g}" if len(errors) else "")
    )
    good = len(ok) == len(fp8) > 0 and bool(roofs) and all(s > 1 for s in speedups.values())
    return Answer("fp8 rows at n = 8192", figure, "all ok, fp8 roof, > 1×", PASS if good else SHORT)


def sweep_frames(ev: Evidence) -> list[pd.DataFrame]:
    frames = []
    for name in SWEEPS:
        try:
            frames.append(_ok(ev.run(name)[0]))
        except NotRun:
            continue
    if len(frames) < 2:
        raise NotRun(f"{len(frames)} plain sweep(s) ran; the spread needs two")
    return frames


def spread(ev: Evidence) -> Answer:
    """Per (case, impl) the ratio of its median to fused's in each sweep, its max / min − 1 across sweeps; and
    each case's pick (the lowest median), which must not change between sweeps."""
    frames = sweep_frames(ev)
    ratios, picks = [], []
    for frame in frames:
        latency = frame.pivot_table(index="case_id", columns="impl", values="latency_ms", aggfunc="first")
        ratios.append(latency.div(latency["fused"], axis=0).drop(columns="fused"))
        picks.append(latency.idxmin(axis=1))
    stacked = pd.concat(ratios, keys=range(len(ratios))).stack()
    by_pair = stacked.groupby(level=[1, 2])
    spread_by = (by_pair.max() / by_pair.min() - 1)[by_pair.count() == len(frames)]  # pairs every sweep measured
    seq = frames[0].drop_duplicates("case_id").set_index("case_id")["seq_len"].astype(int)
    aims = pd.Series(
        [SPREAD_AIM_LONG if seq[c] >= LONG_SEQ else SPREAD_AIM for c, _ in spread_by.index], spread_by.index
    )
    over = spread_by[spread_by > aims]
    flipped = pd.concat(picks, axis=1).dropna().nunique(axis=1).gt(1).sum()
    worst = spread_by.idxmax()
    figure = (
        f"{len(frames)} sweeps: largest ratio spread {spread_by.max():.1%} ({worst[1]}, {worst[0]}), "
        f"{len(over)} of {len(spread_by)} over their aim; picks changed in {flipped} cases"
    )
    good = over.empty and flipped == 0
    return Answer("spread across sweeps", figure, "≤ 5 % (2 % at n ≥ 4096), no flip", PASS if good else SHORT)


def calibration(ev: Evidence) -> Answer:
    found = sorted(ev.root.glob("spread*/cache/calibration-*.json"))
    if not found:
        for name in ("spread3", "spread2"):
            try:
                ev.step(name)
            except NotRun as exc:
                last = exc
                continue
            return Answer("between-process spread", "the spread step stored no calibration", "", SHORT)
        raise last
    stored = json.loads(found[-1].read_text(encoding="utf-8"))
    figure_spread = float(stored["between_process_spread"])
    latency = _ok(ev.run("sweep1")[0]).pivot_table(index="case_id", columns="impl", values="latency_ms")
    ordered = latency.apply(lambda row: sorted(row.dropna()), axis=1)
    leads = [values[1] / values[0] for values in ordered if len(values) > 1]
    smallest = min(leads) if leads else math.nan
    figure = f"{figure_spread:.1%} over {stored['processes']} processes; smallest lead of a pick {smallest:.2f}×"
    ok = figure_spread < smallest - 1
    return Answer("between-process spread", figure, "under every pick's lead", PASS if ok else SHORT)


QUESTIONS: list[tuple[str, Callable[[Evidence], Answer]]] = [
    ("energy", energy_check),
    ("dram_copy", dram_copy),
    ("fused_hardware_flops", range_flops),
    ("fp8_attention", fp8_check),
    ("default sweep wall time", sweep_wall),
    ("counters by range replay", counters_range),
    ("counters' cost per row", counters_cost),
    ("range vs kernel replay bytes", replay_bytes),
    ("energy per call", energy_rows),
    ("energy windows' cost", energy_cost),
    ("fp8 rows at n = 8192", fp8_rows),
    ("spread across sweeps", spread),
    ("between-process spread", calibration),
]


def answers(root: Path) -> list[Answer]:
    """Every question's answer from an unpacked work folder; a step that did not run is NOT RUN with its reason."""
    ev, found = Evidence(root), []
    for question, answer in QUESTIONS:
        try:
            found.append(answer(ev))
        except NotRun as exc:
            found.append(Answer(question, str(exc), "", NOT_RUN))
        except CutShort as exc:
            found.append(Answer(question, str(exc), "", SHORT))
    return found


def render(found: list[Answer]) -> str:
    width = max(len(a.question) for a in found)
    lines = [
        f"{a.verdict:7} {a.question:{width}}  {a.figure}" + (f"  [target: {a.target}]" if a.target else "")
        for a in found
    ]
    return "\n".join(lines) + "\n"


def step_lines(root: Path) -> str:
    """Each step's estimate beside its actual wall time, from plan.json."""
    plan = json.loads((root / PLAN).read_text(encoding="utf-8"))
    lines = [f"budget {plan['budget_s']:.0f} s"]
    for s in plan["steps"]:
        actual = "-" if s["actual_s"] is None else f"{s['actual_s']:.0f} s"
        lines.append(
            f"  {s['name']:16} {s['status']:9} estimate {s['estimate_s']:5.0f} s  actual {actual:>6}  {s['reason']}"
        )
    return "\n".join(lines) + "\n"


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(into, filter="data")
    return into / ARCHIVE_ROOT


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m mhabench.checks.evidence ARCHIVE (gpu-evidence.tgz)", file=sys.stderr)
        return 2
    archive = Path(args[0])
    if not archive.is_file():
        print(f"ARCHIVE {archive}: no such file", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        try:
            root = unpack(archive, Path(scratch))
            text = render(answers(root)) + step_lines(root)
        except (tarfile.TarError, OSError, json.JSONDecodeError, KeyError) as exc:
            print(f"ARCHIVE {archive}: not a gpu-evidence archive ({type(exc).__name__}: {exc})", file=sys.stderr)
            return 2
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
