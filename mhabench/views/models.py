"""``mhabench models``: the shipped model presets, one row each, with the shape a scenario's ``model:`` gets."""

from __future__ import annotations

from mhabench.scenario.models import PRESETS, ModelShape
from mhabench.views.table import TableModel

HEADERS = ("preset", "d_model", "heads", "kv_heads", "head_dim", "bias", "window", "softcap", "context", "source")
NUMERIC = (False, True, True, True, True, False, True, True, True, False)


def _cells(model: ModelShape) -> list[str]:
    return [
        model.name,
        str(model.d_model),
        str(model.heads),
        str(model.kv_heads),
        str(model.head_dim) + (" *" if model.head_dim_set_apart else ""),
        "yes" if model.bias else "no",
        str(model.sliding_window or "—"),
        f"{model.softcap:g}" if model.softcap else "—",
        "—" if model.max_position is None else str(model.max_position),
        model.source,
    ]


def models_table() -> TableModel:
    """Every preset in the order they are listed in :data:`PRESETS`; ``*`` marks a head_dim set apart from
    d_model / heads, the case a scenario could not describe before ``head_dim`` was a field; ``—``: not given."""
    return TableModel(
        title="model presets (model: <preset> in a scenario)",
        headers=HEADERS,
        cells=[_cells(model) for model in PRESETS.values()],
        numeric=NUMERIC,
        caption="* head_dim set apart: heads × head_dim ≠ d_model. window: sliding-window layers; "
        "context: max_position_embeddings.",
    )
