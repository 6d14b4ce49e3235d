"""How long a sweep takes on a GPU, estimated from a recorded run of it, before a GPU is at hand.

A recorded run folder (results.csv + manifest.json) holds each ok row's per-call median, its samples and its
calls per sample. :func:`replayed_rows` replays every case's rounds under a timing config through this tree's
stopping rule (:func:`mhabench.measure.rounds.run_rounds`), each call lasting its recorded median behind one L2
flush of ``FLUSH_MIN_BYTES`` at the manifest's bandwidth roof. What the run spent outside its rounds (inputs,
references, warm-ups, kernel counts) is shared out evenly over its ok rows. :func:`command_estimate` adds the
command's start-up (Python, torch, CUDA) and scales the total so that the recorded run's own config, priced
this way, takes the wall time its command was measured at: the one measurement corrects the model.
An estimate: calls are taken to last their median, and nothing else of a row changes with the timing.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pandas as pd

from mhabench.measure.cuda_timing import FLUSH_MIN_BYTES
from mhabench.measure.rounds import Block, run_rounds
from mhabench.scenario.config import TimingConfig

WALL_LINE = re.compile(r"(\d+) ms wall")
"""The line ``make gpu-sweep`` prints after the sweep: the whole command's wall time."""


@dataclasses.dataclass(frozen=True)
class ReplayedCall:
    """A recorded row as a :class:`mhabench.measure.rounds.BlockTimer`: every call takes its measured median."""

    call_ms: float
    host_ms: float

    def block(self, calls: int) -> Block:
        return Block(self.call_ms, calls * self.call_ms / 1e3)

    def sample(self, calls: int) -> Block:
        return dataclasses.replace(self.block(calls), host_ms=self.host_ms)


def manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def span_s(record: dict[str, Any]) -> float:
    """Seconds from a manifest's ``started_at`` to its ``finished_at`` (its ``heartbeat`` if it never finished)."""
    end = record.get("finished_at") or record["heartbeat"]
    started, finished = (datetime.datetime.fromisoformat(value) for value in (record["started_at"], end))
    return (finished - started).total_seconds()


def flush_ms(record: dict[str, Any]) -> float:
    """One L2 flush before a timed call: ``FLUSH_MIN_BYTES`` written at the run's bandwidth roof."""
    roofs = record["roofline"].values()
    return FLUSH_MIN_BYTES / (min(roof["peak_gbps"] for roof in roofs) * 1e9) * 1e3


def ok_rows(run_dir: Path) -> pd.DataFrame:
    """The run's ok rows with the timing columns as numbers."""
    rows = pd.read_csv(run_dir / "results.csv", keep_default_na=False).query("status == 'ok'")
    types = {"latency_ms": float, "host_latency_ms": float, "samples": int, "calls_per_sample": int}
    return rows.astype(types)


def rounds_wall_s(blocks: list[Block], calls: int, flush: float) -> float:
    """Device time of a row's rounds: each timed call and each host-timed call behind its L2 flush."""
    hosts = [block.host_ms for block in blocks if not math.isnan(block.host_ms)]
    timed_ms = sum(calls * (block.per_call_ms + flush) for block in blocks)
    return (timed_ms + sum(host + flush for host in hosts)) / 1e3


def replayed_rows(run_dir: Path, timing: TimingConfig) -> pd.DataFrame:
    """Every ok row with ``taken_s`` (its recorded rounds), ``replayed_samples`` and ``replayed_s`` (its rounds
    under ``timing``) and ``overhead_s`` (its even share of the run's time outside the rounds). The replay keeps
    the run's block sizes, so ``timing`` must keep its ``min_run_time_s / min_samples``."""
    record = manifest(run_dir)
    recorded = record["config"]["timing"]
    if not math.isclose(
        timing.min_run_time_s / timing.min_samples, recorded["min_run_time_s"] / recorded["min_samples"]
    ):
        raise ValueError("the replay keeps the run's block sizes: min_run_time_s / min_samples must stay as it was")
    flush, ok = flush_ms(record), ok_rows(run_dir)
    replayed: dict[tuple[str, str], tuple[int, float]] = {}
    for _, case in ok.groupby("case_id", sort=False):
        timers = {r.impl: ReplayedCall(r.latency_ms, r.host_latency_ms) for r in case.itertuples()}
        calls = {r.impl: r.calls_per_sample for r in case.itertuples()}
        blocks = run_rounds(timers, calls, timing, seed=0)
        for impl in timers:
            replayed[(case["case_id"].iloc[0], impl)] = (
                len(blocks[impl]),
                rounds_wall_s(blocks[impl], calls[impl], flush),
            )
    taken = [
        rounds_wall_s([Block(r.latency_ms, math.nan, r.host_latency_ms)] * r.samples, r.calls_per_sample, flush)
        for r in ok.itertuples()
    ]
    keys = list(zip(ok["case_id"], ok["impl"], strict=True))
    overhead_s = (span_s(record) - sum(taken)) / len(ok)
    return ok.assign(
        taken_s=taken,
        replayed_samples=[replayed[key][0] for key in keys],
        replayed_s=[replayed[key][1] for key in keys],
        overhead_s=overhead_s,
    )


def rows_estimate_s(rows: pd.DataFrame, keep: Collection[tuple[str, str]] | None = None) -> float:
    """Replayed rounds plus overhead share of the (case_id, impl) rows in ``keep`` (all when None), start-up
    not included."""
    if keep is not None:
        wanted = set(keep)
        rows = rows[[key in wanted for key in zip(rows["case_id"], rows["impl"], strict=True)]]
    return float((rows["replayed_s"] + rows["overhead_s"]).sum())


@dataclasses.dataclass(frozen=True)
class CommandTiming:
    """A measured command of a sweep: its wall time from the shell and the run's own span (its manifest)."""

    wall_s: float
    span_s: float

    @property
    def startup_s(self) -> float:
        """Before the run's clock starts and after it stops: Python, imports, CUDA, the summary."""
        return self.wall_s - self.span_s


def command_timing(log: Path, manifest_path: Path) -> CommandTiming:
    """The wall time ``make gpu-sweep`` printed (its last "N ms wall" line) beside the manifest's span."""
    walls = WALL_LINE.findall(log.read_text(encoding="utf-8"))
    if not walls:
        raise ValueError(f"{log}: no 'N ms wall' line")
    return CommandTiming(int(walls[-1]) / 1e3, span_s(json.loads(manifest_path.read_text(encoding="utf-8"))))


def command_estimate(
    rows: pd.DataFrame, measured: CommandTiming, keep: Collection[tuple[str, str]] | None = None
) -> float:
    """Wall time of a command running the ``keep`` rows: start-up plus their rows, scaled by how far the same
    estimate of every recorded row falls short of the measured command (``measured``: the same config)."""
    scale = measured.wall_s / (measured.startup_s + rows_estimate_s(rows))
    return scale * (measured.startup_s + rows_estimate_s(rows, keep))
