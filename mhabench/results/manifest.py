"""A run folder's ``manifest.json`` as a type: the fields every writer records, and a closed status vocabulary.

Four writers make run folders — ``mhabench run``, rank 0 of a torchrun launch, ``mhabench probe`` and
``mhabench merge`` — all through :func:`mhabench.results.lifecycle.run_folder`, so they agree on the
typed fields below. What only one kind of run records (``roofline``, ``drift``, ``world_size``,
``backend``, ``merged_from``, ``forced``, …) is kept as an extra field, untyped, so nothing a writer
adds is lost on the way back.

``status`` is one of :data:`STATUSES`:

- ``running``: a process is writing the folder (:mod:`mhabench.results.liveness` tells whether it still is);
- ``complete``: the folder holds every row of its config;
- ``interrupted``: stopped early by Ctrl-C, or killed (a killed run says ``running`` and reads as
  ``interrupted``); also a merge over shards that did not all complete;
- ``failed``: stopped early by an error; also a merge over a shard that failed.

``run --resume`` finishes an ``interrupted`` or ``failed`` run. Reading stays lenient where history
requires it: a manifest written before ``format_version`` has none (format 1), one written before
liveness has no pid, host or heartbeat, one without a status keeps none, and ``incomplete``, which
``merge`` wrote before the vocabulary was closed, reads as ``interrupted``. Any other status, or a
typed field of the wrong type, is refused in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic import dataclasses as pydantic_dataclasses

from mhabench.errors import ResultsCorruptError, describe_validation_error

Status = Literal["running", "complete", "interrupted", "failed"]
Ending = Literal["complete", "interrupted", "failed"]
"""How a run ended: every status but ``running``."""
STATUSES: tuple[str, ...] = get_args(Status)
LEGACY_STATUSES = {"incomplete": "interrupted"}
"""Statuses older mhabench wrote, and what they mean in :data:`STATUSES` (merge's partial result)."""


@pydantic_dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``--shard I/N``, 0-based), as the manifest's ``shard`` records it."""

    index: Annotated[int, Field(ge=0)]
    count: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _index_below_count(self) -> Shard:
        if self.index >= self.count:
            raise ValueError(f"shard index {self.index} is not below the count {self.count}")
        return self

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


class Manifest(BaseModel):
    """What a run folder says about itself. Assignments are validated: a writer cannot record a status
    outside the vocabulary, or a pid that is not an integer."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    format_version: StrictInt = 1
    """The on-disk format (:data:`mhabench.results.schema.FORMAT_VERSION` when written now; absent: 1)."""
    run_id: StrictStr | None = None
    kind: Literal["run", "probe"] = "run"
    """``probe`` for ``mhabench probe`` (claims and probes, no results); a benchmark run leaves it out."""
    command: list[StrictStr] = Field(default_factory=list)
    config: dict[str, Any] | None = None
    """The resolved config, as ``run --resume`` validates it again."""
    environment: dict[str, Any] = Field(default_factory=dict)
    cases: StrictInt | None = None
    started_at: StrictStr | None = None
    """ISO-8601 UTC time; kept by ``--resume``, the first shard's start in a merged run."""
    finished_at: StrictStr | None = None
    """ISO-8601 UTC time the writer ended; None while running."""
    status: Status | None = None
    pid: StrictInt | None = None
    """Liveness: the writing process, its host, its start in clock ticks since boot, and its last heartbeat."""
    host: StrictStr | None = None
    pid_started: StrictInt | None = None
    heartbeat: StrictStr | None = None
    shard: Shard | None = None
    """A ``--shard I/N`` run; ``merge`` needs it, ``--resume`` measures the same shard again."""
    implementations: list[StrictStr] | None = None
    repeats: Annotated[StrictInt, Field(ge=1)] = 1
    plugins: list[StrictStr] = Field(default_factory=list)
    """Plugin files the run loaded; ``--resume`` loads them again."""
    resumed: list[dict[str, Any]] = Field(default_factory=list)
    """One entry per ``--resume``: when, the command, what ``--force`` overrode, and the resuming process."""
    roofline: dict[str, Any] = Field(default_factory=dict)
    """The roofs (peak TFLOP/s and GB/s, their source) per dtype the rows were placed against."""
    code: dict[str, Any] = Field(default_factory=dict)
    """The code each implementation ran: per name, its repository, commit, commit time and dirtiness."""
    drift: dict[str, Any] | None = None
    """The drift watch's reference timings of the run and what they say (:mod:`mhabench.measure.drift`)."""

    @property
    def replicated(self) -> bool:
        """Whether the run's repeats are independent processes (``replicates`` above 1: an extra field, written only
        by a replicated run): its answers are read across processes, not within one."""
        count = getattr(self, "replicates", None)
        return isinstance(count, int) and count > 1

    @field_validator("status", mode="before")
    @classmethod
    def _legacy_status(cls, value: Any) -> Any:
        return LEGACY_STATUSES.get(value, value) if isinstance(value, str) else value

    @classmethod
    def parse(cls, data: Any, where: Path) -> Manifest:
        """``data`` (a manifest's JSON) typed; a one-line :class:`ResultsCorruptError` naming ``where`` otherwise."""
        if not isinstance(data, dict):
            raise ResultsCorruptError(f"{where}: cannot read the manifest (not a JSON object)")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ResultsCorruptError(describe_validation_error(exc, lambda loc: [], where)) from None

    def as_dict(self) -> dict[str, Any]:
        """The manifest as JSON data: the fields that were written or read, extras included. A default that
        was never written stays out, so an old manifest reads back as it was."""
        return self.model_dump(exclude_unset=True)
