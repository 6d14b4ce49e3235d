"""What ``mhabench explain`` shows: per slower row (or each row asked about), its sentence and its stages against
the model.

The figures and findings come from :mod:`mhabench.analysis.explain`. This module words them, from its templates keyed
by rule and finding (names and figures spelt as :mod:`mhabench.views.wording` spells them), and lays them out as the
terminal (rich), Markdown or JSON (the figures and codes, no sentences), so the formats cannot say different things.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence

from rich.console import RenderableType
from rich.text import Text

from mhabench.analysis.explain import explain
from mhabench.analysis.explain.explain import Explanation
from mhabench.errors import InputError
from mhabench.results.stages import StageFigures
from mhabench.stage_cost import STAGE_LABELS
from mhabench.views.spelling import impl
from mhabench.views.table import TableModel, format_number, human_bytes, human_count, to_markdown, to_rich
from mhabench.views.wording import stage_clause

RULES = {
    "per_token_gemm": "it ran as {batch:,} batched GEMMs of {rows} row(s) each, one per token position (`{top_op}`)",
    "padded_gemm": (
        "its GEMM kernel `{top_op}` computed padding: a GEMM on thin (one-row) matrices filled out to the kernel's "
        "tile, as one GEMM per token runs"
    ),
    "many_small_ops": (
        "it ran {ops} ops in this stage (`{top_op}` ×{count}): one small op per head, each too small to fill the device"
    ),
}
"""What each rule of :mod:`mhabench.analysis.explain.rules` says, with its figures."""
REMEDIES: dict[str, dict[str, str]] = {
    "torch_mha": {
        "per_token_gemm": "that is nn.MultiheadAttention with batch_first=True off its fast path: it transposes "
        "the input to (n, b, d) and F.linear turns that view into one GEMM per token; "
        "SDPA (`fused`) avoids it, and so does its native fast path on the CPU (`torch_mha_fast`: biases present, "
        "eval, no grad)",
        "padded_gemm": "that is nn.MultiheadAttention with batch_first=True off its fast path, whose QKV projection "
        "runs as one GEMM per token; SDPA (`fused`) avoids it, and so does its native "
        "fast path on the CPU (`torch_mha_fast`; configs/gpu-torch-mha.yaml measures it on a GPU)",
    },
    "torch_mha_seq_first": {
        "per_token_gemm": "batch_first=False avoids it only at batch > 1 (an (n, 1, d) input still runs one GEMM "
        "per token); SDPA (`fused`) avoids it, and so does the native fast path on the CPU (`torch_mha_fast`)",
    },
    "per_head": {"many_small_ops": "packing the heads into one GEMM (`fused`) avoids it"},
}
"""What avoids a rule's departure, for implementations whose cause is known (by rule name)."""
FINDINGS = {
    explain.NO_RULE: "; no rule knows this departure",
    explain.OTHER_STAGE: (
        "; the model prices nothing there: time no op of a known kind covers (Python, dispatch, views)"
    ),
    explain.UNPRICED_STAGE: "; its model prices no such stage: work its layout adds (`{top_op}`)",
    explain.SLOWER_STAGE: "; the stage runs the model's work, only slower than the pick's",
}
"""What an explanation says where no rule matches its stage, by its finding."""


def _standing(found: Explanation) -> str:
    """How the row stands against the case's fastest, as the sentence opens."""
    if found.standing == explain.PICK:
        return "the case's fastest"
    if found.standing == explain.SLOWER:
        return f"{found.slower_by:.3g}× slower than {impl(found.pick)}"
    if found.standing == explain.CANNOT_TELL:
        return f"{found.slower_by:.3g}× slower than {impl(found.pick)} by its median; no interval says how surely"
    return f"tied with {impl(found.pick)}, {found.slower_by:.3g}× by its median"


def sentence(found: Explanation) -> str:
    """Why one row is slower: its standing, the dtype it computes in where wider, the stage and what it shows."""
    head = f"{impl(found.impl)} ({_standing(found)})"
    if found.compute_dtype is not None:
        head += (
            f"; it computes in {found.compute_dtype}, wider than the case's {found.case_dtype}: the model prices "
            f"its stages at {found.case_dtype}, so its bytes read about {found.dtype_ratio}× the model's from the "
            "dtype alone"
        )
    stage = found.stage
    if stage is None:
        return f"{head}: no stage breakdown ({SOURCES.get(found.source, found.source)})"
    text = f"{head}: {stage_clause(stage.stage, stage.time_share, stage.flops_ratio, stage.bytes_ratio)}"
    if found.rule:
        text += ": " + RULES[found.rule].format(**found.rule_figures)
        remedy = REMEDIES.get(found.impl, {}).get(found.rule)
        return text + (f"; {remedy}" if remedy else "")
    return text + FINDINGS[found.finding].format(top_op=stage.top_op)


SOURCES = {explain.NO_SOURCE: "a run older than breakdowns, with no kernels.csv to derive one from"}
"""Why a row has no breakdown, by its breakdown source; another source is named as it is."""

FORMATS = ("terminal", "markdown", "md", "json")
NOTHING = (
    "No implementation is 3 % or more slower than its case's fastest: nothing to explain "
    "(--impl NAME breaks down any implementation, the fastest included)."
)


def parse_format(text: str) -> str:
    if text not in FORMATS:
        raise InputError(f"--format: {text!r} is not one of {', '.join(FORMATS)}")
    return "markdown" if text == "md" else text


def stage_table(explanation: Explanation) -> TableModel:
    """The row's stages: time share, what ran and what the model says, and the longest op."""
    headers = ["stage", "time share", "FLOPs", "model FLOPs", "×", "bytes", "model bytes", "×", "longest op"]
    cells = [_cells(figure) for figure in explanation.stages]
    title = f"{explanation.case_label}: {explanation.impl} (breakdown from {explanation.source})"
    return TableModel(title, headers, cells, [False] + [True] * 7 + [False])


def _cells(figure: StageFigures) -> list[str]:
    share = "" if math.isnan(figure.time_share) else f"{100 * figure.time_share:.0f} %"
    top = figure.top_op + (f" ×{figure.top_op_count}" if figure.top_op_count > 1 else "")
    return [
        STAGE_LABELS.get(figure.stage, figure.stage),
        share,
        _or_blank(figure.flops, human_count),
        _or_blank(figure.model_flops, human_count),
        _or_blank(figure.flops_ratio, lambda ratio: format_number(ratio, ".2f")),
        _or_blank(figure.bytes_moved, human_bytes),
        _or_blank(figure.model_bytes, human_bytes),
        _or_blank(figure.bytes_ratio, lambda ratio: format_number(ratio, ".3g")),
        top,
    ]


def _or_blank(value: float | None, show: Callable[[float], str]) -> str:
    return "" if value is None else show(value)


def to_terminal(explanations: Sequence[Explanation]) -> list[RenderableType]:
    """Each explanation's sentence with its stage table under it: the sentence names one stage, the table shows
    the others it was chosen over."""
    if not explanations:
        return [Text(NOTHING)]
    shown: list[RenderableType] = []
    for explanation in explanations:
        shown.append(Text(f"{explanation.case_label}: {sentence(explanation)}"))
        if explanation.stages:
            shown.append(to_rich(stage_table(explanation)))
    return shown


def to_markdown_text(explanations: Sequence[Explanation]) -> str:
    """The same as :func:`to_terminal`, as a Markdown list with a table under each item."""
    if not explanations:
        return NOTHING
    parts = []
    for explanation in explanations:
        parts.append(f"- **{explanation.case_label}**: {sentence(explanation)}")
        if explanation.stages:
            parts.append("\n" + to_markdown(stage_table(explanation)))
    return "\n".join(parts)


def to_json(explanations: Sequence[Explanation]) -> str:
    return json.dumps([explanation.record() for explanation in explanations], indent=2, allow_nan=False, default=str)
