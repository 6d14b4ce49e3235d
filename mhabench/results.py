"""The on-disk format of a run, in one place.

``results/<run_id>/`` holds
- ``results.csv``: one row per (case, implementation), appended as soon as the row exists;
- ``results.parquet``: the same rows plus ``times_ms`` (raw per-call latency samples), rewritten
  after every row so it is never behind the CSV;
- ``manifest.json``: environment, resolved config, roofline peaks, start and end time.

``load_run`` reads a run back; ``resolve_run`` turns ``latest``, a run id or a path into a folder.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from mhabench.errors import OutputFolderError, ResultsCorruptError, RunNotFoundError

CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
MANIFEST_NAME = "manifest.json"
SAMPLES_COLUMN = "times_ms"

IDENTITY_COLUMNS = [
    "run_id", "scenario", "case_id", "impl", "device", "device_name", "dtype",
    "batch", "seq_len", "d_model", "heads", "head_dim", "kv_heads", "mode", "phase", "causal", "bias",
    "status", "error",
]  # fmt: skip
METRIC_COLUMNS = [
    "max_abs_err", "max_rel_err", "sdpa_backend",
    "latency_ms", "latency_p25_ms", "latency_p75_ms", "latency_mean_ms", "samples",
    "calls_per_sample", "noisy", "tokens_per_s", "compile_time_s",
    "peak_memory_bytes", "memory_method", "predicted_peak_bytes",
    "params", "kv_cache_bytes",
    "flops", "useful_flops", "softmax_flops", "proj_flops", "attn_flops", "backward_flops",
    "bytes_moved", "proj_bytes", "attn_bytes",
    "arithmetic_intensity", "proj_intensity", "attn_intensity",
    "achieved_tflops", "achieved_gbps",
    "peak_tflops", "peak_gbps", "roofline_source", "roofline_bound", "attainable_tflops",
    "roofline_efficiency",
]  # fmt: skip
COLUMNS = IDENTITY_COLUMNS + METRIC_COLUMNS
"""Every CSV column, in order. The Parquet file has these plus ``times_ms``."""

# Columns that identify "the same measurement" across runs (compare matches on these).
CASE_KEY = [
    "impl", "device", "dtype", "batch", "seq_len", "d_model", "heads", "kv_heads", "mode", "phase", "causal", "bias",
]  # fmt: skip


def sanitize_name(name: str) -> str:
    """A run name safe to use as one path component: no separators, no leading dots."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return cleaned[:80] or "run"


def new_run_dir(out_root: Path, name: str, now: dt.datetime) -> Path:
    """Create ``out_root/<UTC timestamp>-<name>`` (suffixed if it already exists)."""
    base = f"{now.astimezone(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{sanitize_name(name)}"
    try:
        out_root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            run_dir = out_root / (base if attempt == 0 else f"{base}-{attempt}")
            try:
                run_dir.mkdir()
                return run_dir
            except FileExistsError:
                continue
    except OSError as exc:
        raise OutputFolderError(f"--out: cannot create a run folder in {out_root} ({exc.strerror})") from None
    raise OutputFolderError(f"--out: too many runs named {base} in {out_root}")


class RunWriter:
    """Writes a run's rows incrementally, so a crash keeps every finished row on disk."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.rows: list[dict[str, Any]] = []
        with open(run_dir / CSV_NAME, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerow(COLUMNS)

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def append(self, row: dict[str, Any]) -> None:
        """Add one row: append it to the CSV, then rewrite the Parquet file."""
        unknown = set(row) - set(COLUMNS) - {SAMPLES_COLUMN}
        if unknown:
            raise ValueError(f"row has columns the format does not define: {sorted(unknown)}")
        self.rows.append(row)
        with open(self.run_dir / CSV_NAME, "a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, COLUMNS, extrasaction="ignore").writerow(row)
        frame = rows_frame(self.rows)
        tmp = self.run_dir / (PARQUET_NAME + ".tmp")
        frame.to_parquet(tmp, index=False)
        tmp.replace(self.run_dir / PARQUET_NAME)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.run_dir / (MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(self.run_dir / MANIFEST_NAME)


def rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a DataFrame with every column of the format, in order."""
    frame = pd.DataFrame(rows, columns=[*COLUMNS, SAMPLES_COLUMN])
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: list(v) if isinstance(v, list | tuple) else [])
    return frame


@dataclasses.dataclass(frozen=True)
class Run:
    """A run read back from disk."""

    path: Path
    manifest: dict[str, Any]
    rows: pd.DataFrame

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id", self.path.name))


def is_run_dir(path: Path) -> bool:
    return (path / MANIFEST_NAME).is_file() and ((path / PARQUET_NAME).is_file() or (path / CSV_NAME).is_file())


def resolve_run(ref: str | Path, results_root: Path = Path("results")) -> Path:
    """``latest``, a run id under ``results_root``, or a path → the run folder."""
    ref_text = str(ref)
    if ref_text == "latest":
        runs = sorted(p for p in results_root.glob("*") if is_run_dir(p)) if results_root.is_dir() else []
        if not runs:
            raise RunNotFoundError(f"no runs under {results_root}/ (run `mhabench run` first)")
        return max(runs, key=lambda p: (p / MANIFEST_NAME).stat().st_mtime)
    for candidate in (Path(ref_text), results_root / ref_text):
        if is_run_dir(candidate):
            return candidate
    if Path(ref_text).is_dir():
        raise RunNotFoundError(f"{ref_text}: not an mhabench run folder (no {MANIFEST_NAME} and results)")
    raise RunNotFoundError(f"{ref_text}: no such run folder or run id under {results_root}/")


def load_run(path: str | Path, results_root: Path = Path("results")) -> Run:
    """Read a run folder (or run id, or ``latest``): manifest and rows, raw samples included."""
    run_dir = resolve_run(path, results_root)
    try:
        manifest = json.loads((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
    except (OSError, ValueError) as exc:
        raise ResultsCorruptError(f"{run_dir / MANIFEST_NAME}: cannot read the manifest ({exc})") from None
    return Run(run_dir, manifest, _read_rows(run_dir))


def _read_rows(run_dir: Path) -> pd.DataFrame:
    parquet = run_dir / PARQUET_NAME
    source = parquet if parquet.is_file() else run_dir / CSV_NAME
    try:
        frame = pd.read_parquet(parquet) if source == parquet else pd.read_csv(source)
    except Exception as exc:  # pyarrow and pandas raise many types for a damaged file
        raise ResultsCorruptError(f"{source}: cannot read the results ({type(exc).__name__}: {exc})") from None
    missing = [c for c in IDENTITY_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsCorruptError(f"{source}: not mhabench results (missing columns {missing})")
    if SAMPLES_COLUMN not in frame.columns:
        frame[SAMPLES_COLUMN] = [[] for _ in range(len(frame))]
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: [float(x) for x in v] if v is not None else [])
    return frame
