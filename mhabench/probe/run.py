"""``mhabench probe``: sweep a probe file and write ``results/<run_id>/`` with

- ``probes.csv``: one row per case × layer × head × variant × statistic, mean and standard deviation
  over the case's input draws (layer-wide statistics have an empty ``head``), appended case by case;
- ``claims.csv``: one row per claim and case (:class:`mhabench.probe.claims.ClaimRow`), written at the
  end because the trend claims compare the cases of a scenario;
- ``manifest.json``: ``"kind": "probe"``, command, resolved config, environment, start, end, and the
  format version, status and liveness every run folder has (:func:`mhabench.results.lifecycle.run_folder`:
  the heartbeat is refreshed after each case, so a killed probe run reads as ``interrupted``).
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mhabench.measure.environment import environment
from mhabench.probe.claims import CLAIM_COLUMNS, ClaimRow, case_claims, run_claims, scenario_claims
from mhabench.probe.config import ProbeCase, ProbeConfig, expand
from mhabench.probe.inputs import PretrainedFile, ProbeSource, source_for
from mhabench.probe.measure import CaseMeasurement, measure_case
from mhabench.results.lifecycle import run_folder
from mhabench.results.manifest import Manifest
from mhabench.results.store import new_run_dir

PROBES_NAME = "probes.csv"
CLAIMS_NAME = "claims.csv"
PROBE_COLUMNS = [
    "case_id",
    "scenario",
    "batch",
    "seq_len",
    "d_model",
    "heads",
    "head_dim",
    "kv_heads",
    "bias",
    "weights",
    "layer",
    "head",
    "variant",
    "statistic",
    "mean",
    "sd",
    "samples",
]


@dataclasses.dataclass(frozen=True)
class ProbeRun:
    run_dir: Path
    claims: list[ClaimRow]

    @property
    def records(self) -> list[dict[str, Any]]:
        """The claims as claims.csv records, for :func:`mhabench.probe.table.verdict_table`."""
        return [dataclasses.asdict(row) for row in self.claims]


def _case_columns(case: ProbeCase) -> dict[str, Any]:
    return {
        "case_id": case.case_id,
        "scenario": case.scenario,
        "batch": case.batch,
        "seq_len": case.seq_len,
        "d_model": case.d_model,
        "heads": case.heads,
        "head_dim": case.head_dim,
        "kv_heads": case.kv_heads,
        "bias": case.bias,
        "weights": str(case.weights.path) if case.weights else "random",
    }


def _summary(values: np.ndarray) -> dict[str, Any]:
    """Mean and sample standard deviation over the draws (0 with one draw)."""
    sd = float(values.std(ddof=1)) if values.size > 1 else 0.0
    return {"mean": float(values.mean()), "sd": sd, "samples": values.size}


def probe_rows(m: CaseMeasurement) -> list[dict[str, Any]]:
    """probes.csv rows of one case: every head's statistics, then the layer-wide ones."""
    base = _case_columns(m.case)
    rows = []
    for (variant, statistic), values in m.head_values.items():
        for index, head in np.ndindex(values.shape[:2]):
            rows.append(
                base
                | {"layer": m.layers[index], "head": head, "variant": variant, "statistic": statistic}
                | _summary(values[index, head])
            )
    for (variant, statistic), values in m.layer_values.items():
        for index, layer in enumerate(m.layers):
            rows.append(
                base
                | {"layer": layer, "head": "", "variant": variant, "statistic": statistic}
                | _summary(values[index])
            )
    return rows


def _append_csv(path: Path, columns: Sequence[str], rows: list[dict[str, Any]]) -> None:
    new = not path.exists()
    with open(path, "a", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def _prepare(config: ProbeConfig) -> list[list[tuple[ProbeCase, ProbeSource]]]:
    """Every case with its weights, per scenario, before anything is written: a bad file fails first."""
    files: dict[Path, PretrainedFile] = {}
    return [[(case, source_for(case, files)) for case in expand(spec)] for spec in config.scenarios]


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run on one torch thread, then restore the setting.

    A probe is many small float64 decompositions. On a shared 2-core machine two threads spin against
    the other processes' work: configs/claims.yaml took 55 s on two threads and 12 s on one under a
    load of 6. The statistics do not depend on the thread count; the manifest records it.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def run_config(config: ProbeConfig, out_root: Path, argv: Sequence[str] = ()) -> ProbeRun:
    """Measure every case, evaluate every claim, and write the run folder."""
    with _one_thread():
        return _run(config, out_root, argv)


def _measure(
    scenarios: list[list[tuple[ProbeCase, ProbeSource]]], run_dir: Path, on_case: Callable[[], None]
) -> list[ClaimRow]:
    """Every case in file order, appended to probes.csv as it finishes (then ``on_case``: the heartbeat);
    the trends once a scenario is done."""
    claims: list[ClaimRow] = []
    for cases in scenarios:
        measured = []
        for case, source in cases:
            measured.append(measure_case(case, source))
            _append_csv(run_dir / PROBES_NAME, PROBE_COLUMNS, probe_rows(measured[-1]))
            on_case()
            claims += case_claims(measured[-1])
        claims += scenario_claims(measured)
    return claims + run_claims()


def _run(config: ProbeConfig, out_root: Path, argv: Sequence[str]) -> ProbeRun:
    scenarios = _prepare(config)
    started = dt.datetime.now(dt.timezone.utc)
    run_dir = new_run_dir(out_root, config.name or "probe", started)
    manifest = Manifest(
        kind="probe",
        command=list(argv),
        config=config.model_dump(mode="json"),
        environment=environment(torch.device("cpu")),
        cases=sum(map(len, scenarios)),
        started_at=started.isoformat(),
    )
    with run_folder(run_dir, manifest) as live:  # Ctrl-C or a crash: probes.csv keeps every finished case
        result = ProbeRun(run_dir, _measure(scenarios, run_dir, live.beat))
        _append_csv(run_dir / CLAIMS_NAME, CLAIM_COLUMNS, result.records)
    return result
