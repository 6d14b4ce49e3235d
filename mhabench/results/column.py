"""One result column's metadata: its role, unit, label and description, attached to a dataclass field.

Every group of the schema (:mod:`mhabench.results.schema`, :mod:`mhabench.results.gpu_groups`) declares
its columns with :func:`column`, so the CSV header, the compare key and docs/columns.md all read the
same metadata.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

Role = Literal["key", "identity", "outcome", "measured", "modelled", "roof", "derived"]
ROLES: dict[str, str] = {
    "key": "identifies the measurement (compare matches runs on these)",
    "identity": "names and shapes that follow from the key",
    "outcome": "what happened",
    "measured": "observed on this machine during the run",
    "modelled": "from the implementation's cost model, not observed",
    "roof": "the device's peak: measured on this machine or from a datasheet (roofline_source says which)",
    "derived": "computed from measured, modelled and roof columns",
}


@dataclasses.dataclass(frozen=True)
class ColumnInfo:
    """What a column means: its name, unit, role, one-line description and short table label."""

    name: str
    unit: str
    role: Role
    description: str
    label: str
    in_csv: bool = True


def column(description: str, *, role: Role, unit: str = "", label: str = "", in_csv: bool = True) -> Any:
    """A schema field (default None: a value object may leave a column empty, e.g. no bias in decode)."""
    return dataclasses.field(
        default=None,
        metadata={"unit": unit, "role": role, "description": description, "label": label, "in_csv": in_csv},
    )
