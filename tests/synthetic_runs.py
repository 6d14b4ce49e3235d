"""Synthetic runs for the compare and report tests: rows written by the real RunWriter, made-up numbers.

Timing real runs would make the statistics tests slow and their answers unknown; here the samples
are drawn from known distributions, so each test knows what the verdict must be.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mhabench.results.calibration import Calibration, save_calibration
from mhabench.results.fingerprint import Fingerprint
from mhabench.results.schema import FORMAT_VERSION, MIN_SPREAD_SAMPLES, ResultRow
from mhabench.results.store import RunWriter, write_manifest

ENVIRONMENT = {
    "mhabench_version": "0.1.0",
    "git_commit": "abc",
    "python": "3.11",
    "platform": "test",
    "torch": "2.13.0",
    "cuda": None,
    "cudnn": None,
    "device": "cpu",
    "device_kind": "cpu",
    "device_name": "Test CPU",
    "cpu_model": "Test CPU",
    "threads": 2,
}
PEAK_TFLOPS, PEAK_GBPS = 0.5, 20.0
HOSTILE = "<script>alert(1)</script>"


def samples(median_ms: float, spread: float, count: int = 30, seed: int = 0) -> list[float]:
    """``count`` latency samples around ``median_ms`` with relative standard deviation ``spread``."""
    rng = np.random.default_rng(seed)
    return [float(max(1e-3, v)) for v in rng.normal(median_ms, spread * median_ms, count)]


def rounds(
    medians_ms: dict[str, float], count: int = 20, drift: float = 0.3, noise: float = 0.01, seed: int = 0
) -> dict[str, list[float]]:
    """Interleaved-round samples: round i of every implementation shares one machine-speed factor.

    The factor varies by ``drift`` (relative) from round to round and each sample adds its own
    ``noise``, so per-round ratios stay tight while each implementation's samples spread widely.
    """
    rng = np.random.default_rng(seed)
    speed = np.exp(rng.normal(0, drift, count))
    return {
        impl: [float(v) for v in ms * speed * np.exp(rng.normal(0, noise, count))] for impl, ms in medians_ms.items()
    }


def row(
    impl: str,
    times_ms: list[float],
    *,
    seq_len: int = 128,
    heads: int = 4,
    d_model: int = 64,
    scenario: str = "sweep",
    status: str = "ok",
    error: str = "",
    dtype: str = "float32",
    run_id: str = "run",
    repeat: int = 0,
) -> dict[str, Any]:
    """One results record with consistent made-up metrics (memory and cost grow with seq_len).

    A failed row is identity + outcome only, as the runner writes it.
    """
    case_id = f"{scenario}/b1-n{seq_len}-d{d_model}-h{heads}-{dtype}"
    identity = {
        "run_id": run_id,
        "scenario": scenario,
        "case_id": case_id,
        "impl": impl,
        "device": "cpu",
        "device_name": "Test CPU",
        "dtype": dtype,
        "batch": 1,
        "seq_len": seq_len,
        "d_model": d_model,
        "heads": heads,
        "head_dim": d_model // heads,
        "kv_heads": heads,
        "mode": "forward",
        "phase": "prefill",
        "causal": False,
        "bias": False,
        "tensor_parallel": 1,
        "repeat": repeat,
        "status": status,
        "error": error,
    }
    if status != "ok":
        return identity
    flops = 8 * seq_len * d_model**2 + 4 * seq_len**2 * d_model
    bytes_moved = (4 * seq_len * d_model + (heads * seq_len**2 if impl == "naive" else 0)) * 4
    median = float(np.median(times_ms))
    p25, p75 = (float(v) for v in np.percentile(times_ms, [25, 75]))
    achieved = flops / (median / 1e3) / 1e12
    attainable = min(PEAK_TFLOPS, PEAK_GBPS * flops / bytes_moved / 1e3)
    return {
        **identity,
        "max_abs_err": 1e-7,
        "max_rel_err": 2e-7,
        "latency_ms": median,
        "latency_p25_ms": p25,
        "latency_p75_ms": p75,
        "latency_mean_ms": float(np.mean(times_ms)),
        "samples": len(times_ms),
        "calls_per_sample": 1,
        "noisy": (p75 - p25) / median > 0.1 if len(times_ms) >= MIN_SPREAD_SAMPLES else None,
        "rounds_id": f"{run_id}-{case_id}-{repeat}",
        "tokens_per_s": seq_len / (median / 1e3),
        "peak_memory_bytes": bytes_moved * 2,
        "memory_method": "synthetic",
        "flops": flops,
        "useful_flops": flops,
        "bytes_moved": bytes_moved,
        "arithmetic_intensity": flops / bytes_moved,
        "achieved_tflops": achieved,
        "achieved_gbps": bytes_moved / (median / 1e3) / 1e9,
        "peak_tflops": PEAK_TFLOPS,
        "peak_gbps": PEAK_GBPS,
        "roofline_source": "synthetic",
        "roofline_bound": "memory",
        "attainable_tflops": attainable,
        "roofline_efficiency": achieved / attainable,
        "times_ms": list(times_ms),
    }


def write_run(root: Path, name: str, rows: list[dict[str, Any]], **environment: Any) -> Path:
    """A run folder as ``mhabench run`` writes it; ``environment`` overrides manifest environment fields."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    writer = RunWriter(run_dir)
    for values in rows:
        writer.append(ResultRow.from_record({**values, "run_id": name}))
    writer.close()
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).isoformat()
    write_manifest(
        writer.run_dir,
        {
            "run_id": name,
            "format_version": FORMAT_VERSION,
            "command": ["mhabench", "run"],
            "environment": {**ENVIRONMENT, **environment},
            "config": {"name": name, "timing": {"min_run_time_s": 0.2}, "scenarios": [{"name": "sweep"}]},
            "roofline": {"float32": {"peak_tflops": PEAK_TFLOPS, "peak_gbps": PEAK_GBPS, "source": "synthetic"}},
            "started_at": now,
            "finished_at": now,
            "status": "complete",
        },
    )
    return run_dir


def make_older(run_dir: Path, columns: tuple[str, ...] = ("repeat", "tensor_parallel")) -> Path:
    """Rewrite a run as a format-2 run wrote it: without ``columns`` in its CSV and Parquet files."""
    csv_path, parquet_path = run_dir / "results.csv", run_dir / "results.parquet"
    pd.read_csv(csv_path).drop(columns=list(columns)).to_csv(csv_path, index=False)
    pd.read_parquet(parquet_path).drop(columns=list(columns)).to_parquet(parquet_path, index=False)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "format_version": 2}))
    return run_dir


def sweep_rows() -> list[dict[str, Any]]:
    """seq_len × heads at fixed d_model, three impls, one noisy row, one failure with a hostile error."""
    rows = []
    for seq_len in (64, 128, 256):
        for heads in (2, 4):
            for impl, scale in (("naive", 1.0), ("per_head", 0.8), ("fused", 0.4)):
                spread = 0.3 if (impl, seq_len, heads) == ("per_head", 64, 2) else 0.01
                times = samples(scale * seq_len / 32 * (1 + heads / 8), spread, count=12, seed=seq_len + heads)
                rows.append(row(impl, times, seq_len=seq_len, heads=heads, scenario=HOSTILE))
    rows.append(row("fused", [], seq_len=512, heads=4, scenario=HOSTILE, status="error", error=f"boom {HOSTILE}"))
    return rows


@pytest.fixture(scope="session")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder of ``sweep_rows`` with its report (md + html) written by ``mhabench report``.

    Built once per session even though two test modules import this fixture (each import is its
    own fixture definition to pytest): the second finds the finished report under the base temp.
    """
    root = tmp_path_factory.getbasetemp() / "shared-sweep"
    run_dir = root / "sweep"
    if (run_dir / "report.html").is_file():
        return run_dir
    write_run(root, "sweep", sweep_rows())
    from mhabench.cli import app  # deferred: the statistics tests that import this module need no CLI

    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert f"report: {run_dir / 'report.html'}" in result.stdout
    return run_dir


# --- report builders: a 5-field sweep, counted FLOPs and bytes, probe runs ----------------------------

FACET_IMPLS = (*(f"impl{i}" for i in range(9)), "naive")
"""Ten implementations, each slower than the one before: a panel draws naive (the slowest) + impl0..impl6."""


def five_field_rows(impls: tuple[str, ...] = FACET_IMPLS) -> list[dict[str, Any]]:
    """seq_len × heads × d_model × causal × batch, two values each: 16 panels against seq_len."""
    rows = []
    sweep = itertools.product((64, 128), (2, 4), (64, 128), (False, True), (1, 2))
    for seq_len, heads, d_model, causal, batch in sweep:
        for rank, impl in enumerate(impls):
            times = [(1 + rank / 4) * seq_len / 32 * batch] * 3
            record = row(impl, times, seq_len=seq_len, heads=heads, d_model=d_model)
            case_id = f"{record['case_id']}-b{batch}{'-causal' if causal else ''}"
            rows.append({**record, "batch": batch, "causal": causal, "case_id": case_id})
    return rows


def with_counts(record: dict[str, Any], flops_factor: float = 1.0, bytes_factor: float = 1.0) -> dict[str, Any]:
    """``record`` with counted FLOPs and bytes at these multiples of the model's, and placed by them."""
    flops, moved = record["flops"] * flops_factor, record["bytes_moved"] * bytes_factor
    gap = max(abs(flops_factor - 1), abs(bytes_factor - 1))
    return {
        **record,
        "measured_flops": int(flops),
        "measured_bytes": int(moved),
        "measured_intensity": flops / moved,
        "model_disagreement": gap,
        "model_disagrees": gap > 0.25,
        "intensity_source": "measured",
        "achieved_tflops": flops / (record["latency_ms"] / 1e3) / 1e12,
    }


PROBE_CLAIMS = [
    {
        "claim": "var_qk",
        "statement": "Var(q·k) = d_k",
        "source": "seed",
        "case": "t/b1-n12-d32-h4",
        "theory": 8.0,
        "measured": 8.1,
        "sd": 0.2,
        "tolerance": "10%",
        "verdict": "PASS",
        "note": "",
    },
    {
        "claim": "jl",
        "statement": "JL distortion",
        "source": "seed",
        "case": "t/b1-n12-d32-h4",
        "theory": "",
        "measured": 0.4,
        "sd": "",
        "tolerance": "-",
        "verdict": "NO-GUARANTEE",
        "note": f"d_k too small {HOSTILE}",
    },
]


def write_probe_run(root: Path, name: str, *, claims: bool = True) -> Path:
    """A run folder as ``mhabench probe`` writes it: manifest (kind probe), probes.csv and claims.csv."""
    run_dir = root / name
    run_dir.mkdir(parents=True)
    probe = {"case_id": "t/b1-n12-d32-h4", "scenario": "t", "statistic": "var_qk", "mean": 8.1, "sd": 0.2}
    pd.DataFrame([probe]).to_csv(run_dir / "probes.csv", index=False)
    if claims:
        pd.DataFrame(PROBE_CLAIMS).to_csv(run_dir / "claims.csv", index=False)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc).isoformat()
    manifest = {
        "kind": "probe",
        "run_id": name,
        "command": ["mhabench", "probe"],
        "config": {"scenarios": [{"name": "t"}]},
        "environment": ENVIRONMENT,
        "cases": 1,
        "started_at": now,
        "finished_at": now,
        "status": "complete",
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def calibrate_test_machine(spread: float) -> Calibration:
    """Store a calibration (``mhabench calibrate``'s file, in the test's empty cache) for the machine these runs
    are written on (``ENVIRONMENT``), with this between-process spread."""
    here = Fingerprint.of(ENVIRONMENT)
    found = Calibration(here.key, here.describe(), spread, 5, "cal-run", "results/cal-run", "now", [])
    save_calibration(found)
    return found


def write_replicated_run(
    root: Path,
    name: str,
    processes: list[dict[str, float]],
    *,
    seq_lens: tuple[int, ...] = (128,),
    drift: float = 0.3,
    noise: float = 0.01,
    seed: int = 0,
    **environment: Any,
) -> Path:
    """A run of ``len(processes)`` replicates as ``replicates: N`` merges them: process i (``repeat`` i) times its
    implementations at the medians ``processes[i]`` (ms) in interleaved rounds, at each of ``seq_lens``."""
    records = []
    for index, medians in enumerate(processes):
        for seq_len in seq_lens:
            times = rounds(medians, drift=drift, noise=noise, seed=seed * 1000 + index * 100 + seq_len % 97)
            records += [row(impl, times[impl], seq_len=seq_len, repeat=index) for impl in medians]
    run_dir = write_run(root, name, records, **environment)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    count = len(processes)
    (run_dir / "manifest.json").write_text(json.dumps({**manifest, "repeats": count, "replicates": count}))
    return run_dir
