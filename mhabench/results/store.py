"""The on-disk format of a run, in one place.

``results/<run_id>/`` holds
- ``results.csv``: one row per (case, implementation), appended as soon as the row exists;
- ``results.parquet``: the same rows plus ``times_ms`` (raw per-call latency samples);
- ``manifest.json``: ``format_version``, environment, resolved config, roofline peaks, start and end,
  status and liveness (:class:`mhabench.results.manifest.Manifest`, written by
  :func:`mhabench.results.lifecycle.run_folder`).

The columns are :mod:`mhabench.results.schema`'s.

``load_run`` reads a run back; ``resolve_run`` turns ``latest``, a run id or a path into a folder.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import functools
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from mhabench.errors import OutputFolderError, ResultsCorruptError, RunNotFoundError
from mhabench.results.columns import COLUMNS, IDENTITY_COLUMNS, SAMPLES_COLUMN, with_key_defaults
from mhabench.results.liveness import effective_status
from mhabench.results.manifest import Manifest
from mhabench.results.schema import FORMAT_VERSION, ResultRow

CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
MANIFEST_NAME = "manifest.json"
T = TypeVar("T")


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

    def __init__(self, run_dir: Path, rows: Sequence[ResultRow] = ()) -> None:
        """A writer whose CSV holds ``rows`` (none for a new run), written to a temporary file and
        renamed, so a kill during :meth:`reopen` cannot leave a folder with fewer rows than before."""
        self.run_dir = run_dir
        self.rows: list[ResultRow] = list(rows)
        self._records = [row.record() for row in self.rows]
        """Each row's record, made once: the CSV line and every rewrite of the Parquet file read it."""
        self.on_row: Callable[[], None] = lambda: None
        """Called after each row is on disk (``run_folder`` refreshes the manifest's heartbeat)."""
        tmp = run_dir / (CSV_NAME + ".tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerow(COLUMNS)
            csv.DictWriter(handle, COLUMNS, extrasaction="ignore").writerows(self._records)
        tmp.replace(run_dir / CSV_NAME)

    @classmethod
    def reopen(cls, run_dir: Path) -> RunWriter:
        """A writer that continues a killed run (``run --resume``), appending after its finished rows.

        Whatever the moment of the kill, the folder is consistent afterwards: the rows are
        :func:`finished_rows`, both files are rewritten from them, and left-over temporary files are
        removed. An ``ok`` row whose raw samples never reached the Parquet file is left out, so it is
        measured again and every ``ok`` row of the resumed run has its samples, as in an unbroken run.
        """
        for name in (CSV_NAME, PARQUET_NAME, MANIFEST_NAME):
            (run_dir / (name + ".tmp")).unlink(missing_ok=True)
        writer = cls(run_dir, [row for row in finished_rows(run_dir) if not _samples_lost(row)])
        writer._write_parquet()
        return writer

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def append(self, row: ResultRow) -> None:
        """Add one row: append it to the CSV; rewrite the Parquet file when the count is a power of two."""
        self.rows.append(row)
        self._records.append(row.record())
        with open(self.run_dir / CSV_NAME, "a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, COLUMNS, extrasaction="ignore").writerow(self._records[-1])
        if len(self.rows) & (len(self.rows) - 1) == 0:
            self._write_parquet()
        self.on_row()

    def close(self) -> None:
        """Bring the Parquet file level with the CSV."""
        self._write_parquet()

    def _write_parquet(self) -> None:
        tmp = self.run_dir / (PARQUET_NAME + ".tmp")
        records_frame(self._records).to_parquet(tmp, index=False)
        tmp.replace(self.run_dir / PARQUET_NAME)


def write_manifest(run_dir: Path, manifest: Mapping[str, Any]) -> None:
    """Replace ``run_dir``'s manifest at once (written beside it, then renamed): a kill leaves the old or the new."""
    tmp = run_dir / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(run_dir / MANIFEST_NAME)


def finished_rows(run_dir: Path) -> list[ResultRow]:
    """The rows a run finished, possibly killed mid-write, typed, with the samples the Parquet file has.

    The CSV says which rows exist: it is appended row by row, so a kill leaves at most its last
    line half-written (without its line end), and that line is dropped. The Parquet file, rewritten
    at powers of two, may lag it by up to half its rows; those rows come back without ``times_ms``.
    A (case_id, impl, repeat) key seen twice keeps its first row: a resumed run measures exactly the
    keys its folder lacks.
    """
    frame = _complete_csv_rows(run_dir / CSV_NAME)
    samples = _samples_by_key(run_dir / PARQUET_NAME)
    rows: dict[tuple[Any, ...], ResultRow] = {}
    for key, record in zip(_row_keys(frame), frame.to_dict("records"), strict=True):
        if key not in rows:
            rows[key] = ResultRow.from_record({**record, "repeat": key[2], SAMPLES_COLUMN: samples.get(key)})
    return list(rows.values())


def _complete_csv_rows(path: Path) -> pd.DataFrame:
    """Every complete line of a results CSV (a format-2 file gets its missing key columns' defaults)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResultsCorruptError(f"{path}: cannot read the results ({exc.strerror})") from None
    complete = data[: data.rfind(b"\n") + 1]  # a line without its end was being written when the run died
    if not complete:  # killed while the header was being written
        return pd.DataFrame(columns=COLUMNS)
    try:
        frame = pd.read_csv(io.BytesIO(complete), keep_default_na=False, na_values=[""], encoding="utf-8")
    except Exception as exc:  # pandas raises many types for a damaged file
        raise ResultsCorruptError(f"{path}: cannot read the results ({type(exc).__name__}: {exc})") from None
    frame = with_key_defaults(frame)
    missing = [c for c in IDENTITY_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsCorruptError(f"{path}: not mhabench results (missing columns {missing})")
    frame["error"] = frame["error"].astype(object).fillna("").astype(str)
    return frame


def _samples_by_key(parquet: Path) -> dict[tuple[Any, ...], Any]:
    """(case_id, impl, repeat) → raw samples, from the Parquet file if there is one."""
    if not parquet.is_file():
        return {}
    frame = _read(parquet)
    return {
        key: list(values) for key, values in zip(_row_keys(frame), frame[SAMPLES_COLUMN], strict=True) if len(values)
    }


def _samples_lost(row: ResultRow) -> bool:
    """The CSV says the row was timed, but its raw samples were not yet in the Parquet file."""
    return row.latency is not None and bool(row.latency.samples) and not row.latency.times_ms


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A run folder's manifest as written, untyped: ``load_run`` and ``--resume`` check its format version
    first, then type it (:meth:`Manifest.parse`)."""
    try:
        manifest = json.loads((run_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
    except (OSError, ValueError) as exc:
        raise ResultsCorruptError(f"{run_dir / MANIFEST_NAME}: cannot read the manifest ({exc})") from None
    return manifest


def rows_frame(rows: list[ResultRow]) -> pd.DataFrame:
    """Rows as a DataFrame with every column of the format, in order (``times_ms`` last)."""
    return records_frame([row.record() for row in rows])


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows' records (:meth:`ResultRow.record`) as :func:`rows_frame` gives them."""
    frame = pd.DataFrame(records, columns=[*COLUMNS, SAMPLES_COLUMN])
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: list(v) if isinstance(v, list | tuple) else [])
    return frame


@dataclasses.dataclass(frozen=True)
class Run:
    """A run folder's manifest and its typed rows, read back from disk or held by the command that wrote them.

    Code that walks rows reads the :class:`ResultRow` attributes; code that does pandas work (group-bys, pivots,
    plots, speedups) reads :attr:`frame`, built once from the same rows, so both see the same cleaned cells."""

    path: Path
    manifest: Manifest
    rows: list[ResultRow]

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.path.name

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (every column of the format, ``times_ms`` last), built on first use and kept.

        Callers that change a frame copy it first: this one is shared by every reader of the run."""
        return read_frame(self.rows)

    def derived(self, compute: Callable[[Run], T]) -> T:
        """``compute(self)``, computed on the first call and kept with the run, like :attr:`frame`: what an upper
        layer derives from the rows alone (the run's answer) is read by several parts of one command (the advice,
        ``compare``'s picks for every baseline, the report) and is the same each time."""
        kept = self.__dict__.setdefault("_derived", {})
        if compute not in kept:
            kept[compute] = compute(self)
        return kept[compute]


PROBE_FILES = ("claims.csv", "probes.csv")
"""What a ``mhabench probe`` run holds instead of results (the names of :mod:`mhabench.probe.run`)."""


def is_run_dir(path: Path) -> bool:
    """A manifest and results, or a manifest and a probe run's files: ``report`` reads both kinds."""
    files = (PARQUET_NAME, CSV_NAME, *PROBE_FILES)
    return (path / MANIFEST_NAME).is_file() and any((path / name).is_file() for name in files)


def is_probe_run(path: Path) -> bool:
    """A probe run folder: claims or probes, no benchmark results."""
    has = [(path / name).is_file() for name in (PARQUET_NAME, CSV_NAME, *PROBE_FILES)]
    return not any(has[:2]) and any(has[2:])


def require_results(run: Run) -> Run:
    """``run`` when it has benchmark results; a probe run is refused in one line (nothing to compare)."""
    if is_probe_run(run.path):
        raise RunNotFoundError(f"{run.path} is a probe run: no results to compare")
    return run


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
    """Read a run folder (or run id, or ``latest``): manifest and rows, raw samples included.

    The manifest is typed (:class:`Manifest`: a status outside the vocabulary is refused in one line; readers use
    its fields, ``as_dict()`` for the JSON as written), with a ``running`` status judged by liveness."""
    run_dir = resolve_run(path, results_root)
    data = read_manifest(run_dir)
    version = data.get("format_version", 1)  # runs written before the schema had no version: format 1
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ResultsCorruptError(
            f"{run_dir}: written in result format version {version!r}; this mhabench reads versions 1 to "
            f"{FORMAT_VERSION} (upgrade mhabench)"
        )
    manifest = Manifest.parse(data, run_dir / MANIFEST_NAME)
    if manifest.status == "running":  # a "running" run whose process is gone reads as interrupted
        manifest.status = effective_status(manifest)
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
    frame = with_key_defaults(frame)  # an older run predates some key columns
    missing = [c for c in IDENTITY_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsCorruptError(f"{source}: not mhabench results (missing columns {missing})")
    return frame


def _read_rows(run_dir: Path) -> list[ResultRow]:
    """The folder's stored records, typed: each becomes a :class:`ResultRow` here (:meth:`ResultRow.from_record`
    cleans its cells), the one place a read cell is cleaned."""
    return typed_rows(stored_frame(run_dir))


def stored_frame(run_dir: Path) -> pd.DataFrame:
    """The records as the folder stores them: the Parquet file when it has every row; else the CSV, with the samples
    the Parquet file has (an older format's key columns filled in, ``error`` as text, ``times_ms`` lists).

    Readers use :func:`load_run`; this is for code that copies rows from folders into a folder (``merge``, a
    replicated run), so the files it writes hold every cell as its source wrote it. A probe run has neither file:
    no rows, every column."""
    parquet, csv_path = run_dir / PARQUET_NAME, run_dir / CSV_NAME
    frame = _read(parquet) if parquet.is_file() else None
    if csv_path.is_file() and (frame is None or len(frame) < _csv_rows(csv_path)):
        samples = {} if frame is None else dict(zip(_row_keys(frame), frame[SAMPLES_COLUMN], strict=True))
        # a line cut off by a killed run is dropped, never read as a row of empty cells; one block per column once
        # the CSV has ~100: adding one more warns
        frame = _complete_csv_rows(csv_path).copy()
        frame[SAMPLES_COLUMN] = [samples.get(key) for key in _row_keys(frame)]
    frame = rows_frame([]) if frame is None else frame
    frame["error"] = frame["error"].astype(object).fillna("").astype(str)
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: [float(x) for x in v] if v is not None else [])
    return frame


def typed_rows(frame: pd.DataFrame) -> list[ResultRow]:
    """Stored records as typed rows: the key columns an older format lacks filled in (:func:`with_key_defaults`),
    ``error`` as the writer held it ("" for none), every other cell cleaned by :meth:`ResultRow.from_record`."""
    frame = with_key_defaults(frame.copy())
    frame["error"] = frame["error"].astype(object).fillna("").astype(str) if "error" in frame else ""
    columns = frame.columns.tolist()  # one object array, not pandas' to_dict: a Series a column, ~10 ms a run
    return [ResultRow.from_record(dict(zip(columns, cells, strict=True))) for cells in frame.to_numpy(object).tolist()]


def read_frame(rows: Sequence[ResultRow]) -> pd.DataFrame:
    """Typed rows as the frame readers do pandas work on: :func:`rows_frame`, with ``error`` as text ("" where
    none) and ``times_ms`` a list of floats (empty: none). A column no row fills holds None, as a Parquet file's empty
    column reads back: record keys built from its cells (``pooled_change``) then match across runs, NaN's never do."""
    frame = rows_frame(list(rows))
    frame["error"] = frame["error"].astype(object).fillna("").astype(str)
    frame[SAMPLES_COLUMN] = frame[SAMPLES_COLUMN].apply(lambda v: [float(x) for x in v])
    return frame.copy()  # one block per dtype: readers add columns to it without pandas' warning


def held_run(run_dir: Path, manifest: Manifest, rows: Sequence[ResultRow]) -> Run:
    """The run a command holds (its typed rows and final manifest), without reading the folder again: what ``run``
    hands to the summary and the advice under its table."""
    return Run(run_dir, manifest, list(rows))


def _row_keys(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """(case_id, impl, repeat) of every row: a ``--repeat`` run has one row per repeat of a pair.

    An empty repeat is 0 (NaN never equals itself, and the CSV and Parquet files store it differently)."""
    repeats = pd.to_numeric(frame["repeat"], errors="coerce").fillna(0).astype(int)
    return list(zip(frame["case_id"], frame["impl"], repeats, strict=True))


def _csv_rows(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return max(0, sum(1 for _ in csv.reader(handle)) - 1)
