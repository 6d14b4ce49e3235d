"""The history store: one SQLite file (``DIR/history.sqlite``) that runs append to and every view reads.

Why SQLite: it is in the standard library, and each append is one transaction, so two runs that finish
at once both land (the second waits on the file lock, up to :data:`BUSY_TIMEOUT_S`) and a process killed
in the middle of an append leaves the store as it was before that append (the rollback journal is undone
on the next open). A partitioned Parquet dataset would need its own locking and a rename protocol for
both; DuckDB would be a new dependency that allows one writing process at a time. A history is small
(one record per row of each run), so SQLite's speed is not a concern.

Tables: ``runs`` (one per run: start time, status, baseline, fingerprint fields and key, environment)
and ``rows`` (one per result row: case, implementation, repeat, the commit of the code it measured and
every metric with its interval). A run already in the store is not added again, so importing a folder
twice, or appending a run that was imported, changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import pandas as pd

from mhabench.errors import InputError, ResultsCorruptError
from mhabench.history.points import RowRecord, RunRecord
from mhabench.results.fingerprint import FINGERPRINT_FIELDS

STORE_NAME = "history.sqlite"
BUSY_TIMEOUT_S = 60.0
"""How long an append waits for another process's append to finish before giving up."""
SCHEMA_VERSION = 1

_ROW_FIELDS = [field.name for field in dataclasses.fields(RowRecord)]
_RUN_COLUMNS = ["run_id", "started_at", "status", "baseline", "fingerprint_key", *FINGERPRINT_FIELDS, "environment"]


def _create_statements() -> list[str]:
    row_columns = ", ".join(f'"{name}"' for name in _ROW_FIELDS)  # quoted: ``case`` is an SQL keyword
    run_columns = ", ".join(f'"{name}"' for name in _RUN_COLUMNS)
    return [
        f"CREATE TABLE IF NOT EXISTS runs ({run_columns}, PRIMARY KEY (run_id))",
        f"CREATE TABLE IF NOT EXISTS rows ({row_columns}, PRIMARY KEY (run_id, case_id, impl, repeat))",
        "CREATE INDEX IF NOT EXISTS rows_series ON rows (case_id, impl)",
        f"PRAGMA user_version = {SCHEMA_VERSION}",
    ]


def store_path(directory: Path) -> Path:
    return directory / STORE_NAME


@contextlib.contextmanager
def connect(directory: Path, create: bool) -> Iterator[sqlite3.Connection]:
    """A connection to ``directory``'s store (created with its folder when ``create``), closed afterwards."""
    path = store_path(directory)
    if not create and not path.is_file():
        raise InputError(f"history: no store in {directory} (run `mhabench run … --history {directory}` first)")
    try:
        if create:
            directory.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise InputError(f"history: cannot open {path} ({exc})") from None
    try:
        if create:
            with _transaction(connection):
                for statement in _create_statements():
                    connection.execute(statement)
        yield connection
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:  # pandas wraps sqlite's error in its own
        raise ResultsCorruptError(f"history: {path}: {exc}") from None
    finally:
        connection.close()


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``: takes the write lock first, so concurrent appends queue, never interleave."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def append(directory: Path, run: RunRecord, rows: Iterable[RowRecord]) -> int:
    """Add a run and its rows in one transaction; the number of rows added (0 when the run was already there)."""
    with connect(directory, create=True) as connection, _transaction(connection):
        if connection.execute("SELECT 1 FROM runs WHERE run_id = ?", (run.run_id,)).fetchone():
            return 0
        fingerprint = dataclasses.asdict(run.fingerprint)
        values = [run.run_id, run.started_at, run.status, run.baseline, run.fingerprint.key]
        values += [fingerprint[name] for name in FINGERPRINT_FIELDS] + [run.environment_json]
        connection.execute(f"INSERT INTO runs VALUES ({', '.join('?' * len(values))})", values)
        added = 0
        insert = f"INSERT OR IGNORE INTO rows VALUES ({', '.join('?' * len(_ROW_FIELDS))})"
        for row in rows:
            connection.execute(insert, [getattr(row, name) for name in _ROW_FIELDS])
            added += 1
        return added


def read(directory: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The store's runs and rows as frames (rows joined with their run's time, fingerprint and baseline)."""
    with connect(directory, create=False) as connection:
        runs = pd.read_sql_query("SELECT * FROM runs", connection)
        rows = pd.read_sql_query(
            "SELECT rows.*, runs.started_at, runs.baseline, runs.fingerprint_key FROM rows JOIN runs USING (run_id)",
            connection,
        )
    return runs, rows


def median_latencies_ms(directory: Path) -> dict[tuple[str, str], float]:
    """Per (case id, implementation), the median latency of the store's ok rows: what a run of those cases
    should take per call here (``run --dry-run --history DIR``). Empty when the folder holds no store yet."""
    if not store_path(directory).exists():
        return {}
    _, rows = read(directory)
    ok = rows[(rows["status"] == "ok") & rows["latency_ms"].notna()]
    medians = ok.groupby(["case_id", "impl"])["latency_ms"].median()
    return {(str(case_id), str(impl)): float(ms) for (case_id, impl), ms in medians.items()}
