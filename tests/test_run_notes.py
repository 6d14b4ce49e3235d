"""The lines under the run's table: torch's expected messages each once (the roof's line: tests/test_roof.py)."""

from __future__ import annotations

import pandas as pd

from mhabench.measure.torch_messages import as_note, messages_of
from mhabench.views.run_notes import note_lines


def test_a_note_keeps_each_message_once_and_drops_bare_headers() -> None:
    messages = [
        "Flash attention kernel not used because:",
        "Nested tensors are not supported.",
        "Nested tensors are not supported.",
    ]
    note = as_note(messages)
    assert note == "torch: Nested tensors are not supported."
    assert messages_of(note) == ["Nested tensors are not supported."]
    assert as_note([]) == ""


def test_the_same_message_on_many_rows_is_printed_once_with_its_rows() -> None:
    shared = "torch: Nested tensors are not supported. We recommend …"
    rows = pd.DataFrame(
        {
            "impl": ["sdpa_nested", "sdpa_nested", "naive"],
            "note": [shared, as_note(["Nested tensors are not supported. We recommend …", "other"]), None],
        }
    )
    assert note_lines(rows) == [
        "torch said (sdpa_nested, 2 rows): Nested tensors are not supported. …",
        "torch said (sdpa_nested, 1 row): other",
    ]
    assert note_lines(rows.drop(columns="note")) == []
