"""One lifecycle for every run folder: ``running`` with liveness, then ``complete``, ``interrupted`` or ``failed``.

``mhabench run`` (new or ``--resume``), rank 0 of a torchrun launch, ``mhabench probe`` and ``mhabench
merge`` all write their folder inside :func:`run_folder`, so their manifests say the same things at the
same moments:

1. on entry the manifest is written at once with ``status: running``, the current ``format_version``,
   ``run_id`` (the folder's name), ``started_at`` (kept when a resumed or merged run gives one) and the
   liveness fields of this process (pid, host, pid_started, heartbeat);
2. every row appended to the :class:`RunWriter` (or :meth:`LiveRun.beat`, for a writer without one)
   refreshes the heartbeat, which readers on another host judge by its age;
3. on the way out the writer's Parquet file is brought level with its CSV and the manifest records
   ``finished_at`` and how the run ended: ``complete`` (or the writer's own ``finished_as``),
   ``interrupted`` on Ctrl-C (``KeyboardInterrupt``) or ``SystemExit``, ``failed`` on any other
   exception, which goes on up.

A process ended without a chance to write — SIGKILL, the OOM killer, or SIGTERM, which mhabench leaves
at its default action — keeps saying ``running``; :func:`mhabench.results.liveness.effective_status`
reads it as ``interrupted`` once its process is gone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mhabench.results.liveness import heartbeat, liveness_fields
from mhabench.results.manifest import Ending, Manifest
from mhabench.results.schema import FORMAT_VERSION
from mhabench.results.store import RunWriter, write_manifest

INTERRUPTIONS = (KeyboardInterrupt, SystemExit)
"""What ends a run as ``interrupted`` (the user or the process stopped it); any other exception is ``failed``."""


class LiveRun:
    """A run folder inside :func:`run_folder`: record manifest fields as they become known, beat after work."""

    def __init__(self, run_dir: Path, manifest: Manifest) -> None:
        self.run_dir = run_dir
        self.manifest = manifest

    def record(self, **fields: Any) -> None:
        """Set manifest fields (a typed one refuses a value of the wrong type) and write the manifest at once."""
        for name, value in fields.items():
            setattr(self.manifest, name, value)
        write_manifest(self.run_dir, self.manifest.as_dict())

    def beat(self) -> None:
        """Refresh the heartbeat: proof of life for a reader that cannot see this process. Written when it changed
        (it counts whole seconds), not once per row: a run of small rows would rewrite the manifest hundreds of
        times a second."""
        fields = heartbeat()
        if fields["heartbeat"] != self.manifest.heartbeat:
            self.record(**fields)


def _ending(exc: BaseException) -> Ending:
    """The status a run stopped by ``exc`` ends with."""
    return "interrupted" if isinstance(exc, INTERRUPTIONS) else "failed"


@contextlib.contextmanager
def run_folder(
    run_dir: Path,
    manifest: Manifest,
    writer: RunWriter | None = None,
    *,
    finished_as: Ending = "complete",
    finished_at: str | None = None,
) -> Iterator[LiveRun]:
    """Write ``run_dir``'s manifest through the lifecycle above while the body fills the folder.

    ``writer`` (the folder's rows) beats after every row and is closed on the way out, success or not.
    ``finished_as`` is the status of a body that returns normally: ``merge`` over shards that did not
    all complete finishes as they did, and at the time the last of them finished (``finished_at``), so a
    merged manifest's duration is the sweep's, not the wait before merging.
    """
    live = LiveRun(run_dir, manifest)
    live.record(
        run_id=run_dir.name,
        format_version=FORMAT_VERSION,
        status="running",
        started_at=manifest.started_at or now_iso(),
        finished_at=None,
        **liveness_fields(),
    )
    if writer is not None:
        writer.on_row = live.beat
    try:
        yield live
        if writer is not None:
            writer.close()
    except BaseException as exc:
        # every row is in the CSV already; a second failure while flushing must not hide the first one
        with contextlib.suppress(Exception):
            if writer is not None:
                writer.close()
        live.record(status=_ending(exc), finished_at=now_iso())
        raise
    live.record(status=finished_as, finished_at=finished_at or now_iso())


def now_iso() -> str:
    """Now, in UTC, as every manifest timestamp is written."""
    return dt.datetime.now(dt.timezone.utc).isoformat()
