"""A run's cases for advice, and the groups of cases that differ only in the fields their scenario sweeps.

A scenario is one question asked over a sweep (seq_len × heads × causal …); its cases share every
other field, so they form one group, and the swept fields are the axes along which an answer can
change. Each case keeps its rows per repeat: a ``--repeat N`` run is N answers to one question.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from mhabench.analysis.case_label import case_label
from mhabench.analysis.executed import executed
from mhabench.analysis.pooled_rows import middle_process
from mhabench.analysis.throughput import throughput, with_roofs
from mhabench.results.cells import plain, text
from mhabench.results.columns import (
    CASE_ID,
    D_MODEL,
    DTYPE,
    HEAD_DIM,
    HEADS,
    IMPL,
    KV_HEADS,
    REPEAT,
    SCENARIO,
    SHAPE_FIELDS,
)

Row = Mapping[str, Any]
SWEEP_FIELDS = (*SHAPE_FIELDS, DTYPE)
"""The fields a scenario may sweep: the case key without the implementation, device and repeat."""


@dataclasses.dataclass(frozen=True)
class MeasuredCase:
    """One case of one run: where it sits in its group's sweep, and its rows, repeat by repeat."""

    run_id: str
    case_id: str
    group: str
    label: str
    fields: Mapping[str, Any]
    repeats: tuple[tuple[Row, ...], ...]
    across_processes: bool = False
    """The repeats are independent processes (a replicated run): its table shows pooled rows, and so do :attr:`rows`."""

    @functools.cached_property
    def rows(self) -> tuple[Row, ...]:
        """The rows the why rules quote, one per implementation: the first repeat's (cost, memory and bound do not
        change between repeats), or for a replicated run the process row its pooled table shows
        (:func:`mhabench.analysis.pooled_rows.middle_process`), so a quoted figure is the table's."""
        if not self.across_processes or len(self.repeats) == 1:
            return self.repeats[0]
        by_impl: dict[str, list[Row]] = {}
        for rows in self.repeats:
            for row in rows:
                by_impl.setdefault(str(row[IMPL]), []).append(row)
        return tuple(middle_process(rows) or rows[0] for rows in by_impl.values())

    def row(self, impl: str) -> Row | None:
        return next((row for row in self.rows if row[IMPL] == impl), None)


def cases_of(run_id: str, rows: pd.DataFrame, across_processes: bool = False) -> list[MeasuredCase]:
    """Every case of a run, in the order the run measured them (``across_processes``: a replicated run), each row
    judged against the roof its whole run shows."""
    by_case: dict[str, dict[int, list[Row]]] = {}
    for record in with_roofs(rows).to_dict("records"):
        by_case.setdefault(str(record[CASE_ID]), {}).setdefault(_repeat(record), []).append(record)
    cases = [_case(run_id, case_id, repeats, across_processes) for case_id, repeats in by_case.items()]
    _with_figures([row for case in cases for row in case.rows])
    return cases


def _with_figures(shown: Sequence[Row]) -> None:
    """The throughput and executed figures of every row the rules quote, computed once over the whole run (one
    frame, not one per row) and kept in the rows, the figures the results table shows for them."""
    if not shown:
        return
    frame = pd.DataFrame(list(shown))
    figures = pd.concat([throughput(frame, roofed=True), executed(frame)], axis=1).to_dict("records")
    for row, found in zip(shown, figures, strict=True):
        row.update(found)  # type: ignore[attr-defined]  # the records cases_of made: plain dicts


def _case(run_id: str, case_id: str, repeats: dict[int, list[Row]], across_processes: bool) -> MeasuredCase:
    first = repeats[min(repeats)][0]
    return MeasuredCase(
        run_id=run_id,
        case_id=case_id,
        group=text(first, SCENARIO) or "run",
        label=case_label(first),
        fields={name: plain(first.get(name)) for name in SWEEP_FIELDS},
        repeats=tuple(tuple(repeats[repeat]) for repeat in sorted(repeats)),
        across_processes=across_processes,
    )


def _repeat(record: Row) -> int:
    """The row's repeat; 0 where the run has none (a run older than ``--repeat``)."""
    value = record.get(REPEAT)
    return 0 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def groups_of(cases: Iterable[MeasuredCase]) -> dict[str, list[MeasuredCase]]:
    """The cases of each group (scenario), in run order."""
    grouped: dict[str, list[MeasuredCase]] = {}
    for case in cases:
        grouped.setdefault(case.group, []).append(case)
    return grouped


class HasFields(Protocol):
    """A case as far as its sweep goes: its fields (a measured case, or a case of the run's answer)."""

    @property
    def fields(self) -> Mapping[str, Any]: ...


def swept(cases: Sequence[HasFields]) -> list[str]:
    """The fields that take more than one value among ``cases``: the group's axes. ``kv_heads`` is not one
    where every case is plain multi-head attention (kv_heads = heads): there it only follows ``heads``;
    nor is ``head_dim`` where every case's heads are d_model / heads wide: there it follows both."""
    followers = {
        KV_HEADS: all(case.fields[KV_HEADS] == case.fields[HEADS] for case in cases),
        HEAD_DIM: all(_follows_width(case.fields) for case in cases),
    }
    return [
        name
        for name in SWEEP_FIELDS
        if len({repr(case.fields[name]) for case in cases}) > 1 and not followers.get(name, False)
    ]


def _follows_width(fields: Mapping[str, Any]) -> bool:
    """head_dim is d_model / heads, or unknown (a run read before the column existed)."""
    head_dim = fields.get(HEAD_DIM)
    return not isinstance(head_dim, int) or head_dim * fields[HEADS] == fields[D_MODEL]


def order(value: Any) -> tuple[int, float, str]:
    """Sort key of a field's values: numbers by size, False before True, then text."""
    if isinstance(value, int | float):  # bool included: False < True
        return (0, float(value), "")
    return (1, 0.0, str(value))


def lines_along(cases: Sequence[MeasuredCase], axis: str) -> list[tuple[list[tuple[str, Any]], list[MeasuredCase]]]:
    """The cases along ``axis`` with every other swept field held fixed: (the fixed fields, the cases
    ordered by ``axis``) per combination; only lines with at least two points."""
    others = [name for name in swept(cases) if name != axis]
    lines: dict[tuple[str, ...], list[MeasuredCase]] = {}
    for case in cases:
        lines.setdefault(tuple(repr(case.fields[name]) for name in others), []).append(case)
    return [
        ([(name, line[0].fields[name]) for name in others], sorted(line, key=lambda case: order(case.fields[axis])))
        for line in lines.values()
        if len(line) > 1
    ]
