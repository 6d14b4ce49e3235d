"""The on-disk format of a run, in one place.

``results/<run_id>/`` holds
- ``results.csv``: one row per (case, implementation), appended as soon as the row exists;
- ``results.parquet``: the same rows plus ``times_ms`` (raw per-call latency samples);
- ``manifest.json``: ``format_version``, environment, resolved config, roofline peaks, start and end.

The columns are :mod:`mhabench.schema`'s.

``load_run`` reads a run back; ``resolve_run`` turns ``latest``, a run id or a path into a folder.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from mhabench.errors import OutputFolderError, ResultsCorruptError, RunNotFoundError
from mhabench.liveness import effective_status
from mhabench.schema import COLUMNS, FORMAT_VERSION, IDENTITY_COLUMNS, KEY_DEFAULTS, SAMPLES_COLUMN, ResultRow

CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
MANIFEST_NAME = "manifest.json"


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
    """Writes a run's rows as they arrive, so a crash keeps every finished row on disk.

    The CSV gets each row appended at once. The Parquet file (which also holds the raw samples) is
    rewritten after rows 1, 2, 4, 8, … and on :meth:`close`: linear total work however long the
    run, and a killed run's Parquet is at most half behind its CSV (``load_run`` then reads the CSV
    and takes the samples the Parquet file has).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.rows: list[ResultRow] = []
        self.on_row: Callable[[], None] = lambda: None
        """Called after each row is on disk (the runner refreshes the manifest's heartbeat)."""
        with open(run_dir / CSV_NAME, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerow(COLUMNS)

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def append(self, row: ResultRow) -> None:
        """Add one row: append it to the CSV; rewrite the Parquet file when the count is a power of two."""
        self.rows.append(row)
        with open(self.run_dir / CSV_NAME, "a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, COLUMNS, extrasaction="ignore").writerow(row.record())
        if len(self.rows) & (len(self.rows) - 1) == 0:
            self._write_parquet()
        self.on_row()

    def close(self) -> None:
        """Bring the Parquet file level with the CSV."""
        self._write_parquet()

    def _write_parquet(self) -> None:
        tmp = self.run_dir / (PARQUET_NAME + ".tmp")
        rows_frame(self.rows).to_parquet(tmp, index=False)
        tmp.replace(self.run_dir / PARQUET_NAME)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.run_dir / (MANIFEST_NAME + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(self.run_dir / MANIFEST_NAME)


def rows_frame(rows: list[ResultRow]) -> pd.DataFrame:
    """Rows as a DataFrame with every column of the format, in order (``times_ms`` last)."""
    frame = pd.DataFrame([row.record() for row in rows], columns=[*COLUMNS, SAMPLES_COLUMN])
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

    def result_rows(self) -> list[ResultRow]:
        """The rows as typed :class:`ResultRow` objects."""
        return [ResultRow.from_record(record) for record in self.rows.to_dict("records")]


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
    version = manifest.get("format_version", 1)  # runs written before the schema had no version: format 1
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ResultsCorruptError(
            f"{run_dir}: written in result format version {version!r}; this mhabench reads versions 1 to "
            f"{FORMAT_VERSION} (upgrade mhabench)"
        )
    manifest["status"] = effective_status(manifest)  # "running" whose process is gone reads as interrupted
    return Run(run_dir, manifest, _read_rows(run_dir))


def _read(source: Path) -> pd.DataFrame:
    try:
        frame = (
            pd.read_parquet(source)
            if source.suffix == ".parquet"
            else pd.read_csv(source, keep_default_na=False, na_values=[""])
        )
    except Exception as exc:  # pyarrow and pandas raise many types for a damaged file
        raise ResultsCorruptError(f"{source}: cannot read the results ({type(exc).__name__}: {exc})") from None
    for name, value in KEY_DEFAULTS.items():  # a format-2 run predates these key columns
        if name not in frame.columns:
            frame[name] = value
    missing = [c for c in IDENTITY_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsCorruptError(f"{source}: not mhabench results (missing columns {missing})")
    return frame


def _read_rows(run_dir: Path) -> pd.DataFrame:
    """The Parquet file when it has every row; else the CSV, with the samples the Parquet file has."""
    parquet, csv_path = run_dir / PARQUET_NAME, run_dir / CSV_NAME
    frame = _read(parquet) if parquet.is_file() else None
    if csv_path.is_file() and (frame is None or len(frame) < _csv_rows(csv_path)):
        samples = (
            {}
            if frame is None
            else dict(zip(zip(frame["case_id"], frame["impl"], strict=True), frame[SAMPLES_COLUMN], strict=True))
        )
        frame = _read(csv_path)
        frame[SAMPLES_COLUMN] = [samples.get(key) for key in zip(frame["case_id"], frame["impl"], strict=True)]
    assert frame is not None  # is_run_dir guarantees one of the two files
    frame["error"] = frame["error"].astype(object).fillna("").astype(str)
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: [float(x) for x in v] if v is not None else [])
    return frame


def _csv_rows(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return max(0, sum(1 for _ in csv.reader(handle)) - 1)
