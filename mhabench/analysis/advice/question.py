"""What the reader asks ``advise`` beyond the run itself: a device kind (``--for``) and implementations (``--impl``)."""

from __future__ import annotations

import dataclasses

DEVICE_KINDS = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class Question:
    """What the reader asks about beyond the run: a device kind (``--for``) and implementations (``--impl``)."""

    device_kind: str | None = None
    impls: tuple[str, ...] = ()
