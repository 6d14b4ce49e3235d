"""A CPU's probed roofs, kept on this machine for the runs of the next hour.

Probing a CPU's roofs (:func:`mhabench.measure.peaks.measured_peaks`: a matmul grown until its rate settles, best
of 5, and a 64 MiB copy, best of 10) takes a quarter to one second of every run on a 2-core machine, a large share
of a small run's own work. So a probe is kept in the machine's cache folder (:func:`mhabench.results.calibration.
cache_dir`, beside the calibration) per fingerprint (CPU model, torch, threads: :mod:`mhabench.results.fingerprint`),
host name and dtype, and a run that starts within :data:`REUSE_MAX_AGE_S` of it takes those figures instead of
probing again. A reused roof says so wherever it is read: ``reused_age_s`` and ``probed_at`` in the manifest's
``roofline``, and "reused" with the age in every row's ``roofline_source``. A row above a reused roof makes the run
probe again, as above a fresh one (:mod:`mhabench.run.roof`); only fresh first probes are kept.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import platform
from pathlib import Path

from mhabench.measure.peaks import DevicePeaks, RoofSource
from mhabench.results.calibration import cache_dir

REUSE_MAX_AGE_S = 3600.0
"""A probe older than an hour is measured again: the roofs are the hardware's, but a probe taken under load comes out
low, and an hour bounds how long one such probe stands in for a fresh one."""


def record_path(fingerprint_key: str, dtype: str) -> Path:
    return cache_dir() / f"roof-{fingerprint_key}-{dtype}.json"


def recent_roof(fingerprint_key: str, dtype: str, now: dt.datetime) -> DevicePeaks | None:
    """The roof of ``dtype`` probed on this host and fingerprint at most :data:`REUSE_MAX_AGE_S` before ``now``,
    marked as reused with its age; None when there is none (or the record cannot be read)."""
    try:
        record = json.loads(record_path(fingerprint_key, dtype).read_text(encoding="utf-8"))
        peaks = DevicePeaks(**record["peaks"])
        probed_at = dt.datetime.fromisoformat(str(peaks.probed_at))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    age_s = (now - probed_at).total_seconds()
    if record.get("host") != platform.node() or peaks.roof_source != RoofSource.PROBED:
        return None
    if not 0 <= age_s <= REUSE_MAX_AGE_S:
        return None
    source = f"{peaks.source}; reused from a probe {age_s:.0f} s before this run"
    return dataclasses.replace(peaks, source=source, reused_age_s=round(age_s, 1))


def kept(fingerprint_key: str, dtype: str, peaks: DevicePeaks, now: dt.datetime) -> DevicePeaks:
    """``peaks``, just probed, stamped with ``now`` and kept for the next runs on this machine."""
    stamped = dataclasses.replace(peaks, probed_at=now.isoformat())
    path = record_path(fingerprint_key, dtype)
    record = {"host": platform.node(), "peaks": dataclasses.asdict(stamped)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")  # two runs at once write their own
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a cache folder that cannot be written only costs the next run its own probe
    return stamped
