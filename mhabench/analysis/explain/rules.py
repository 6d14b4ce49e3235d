"""The departures ``mhabench explain`` knows, as data: which stage and what the figures must show.

Each rule looks at one stage of a row's breakdown (:class:`mhabench.results.stages.StageFigures`): the longest
op's name and shapes (a regular expression), how far its FLOPs and bytes are from the model's, how many ops it
ran. The first rule that matches names what ran, with the figures its sentence quotes (``mhabench.views.wording``
words each rule, and the remedy where the implementation's cause is known). A departure no rule matches is listed
with its numbers, never guessed (docs/stages.md).
"""

from __future__ import annotations

import dataclasses
import re

from mhabench.results.stages import StageFigures

PROJECTIONS = ("qkv_projection", "out_projection")
DEPARTURE = 1.5
"""A stage whose FLOPs or bytes exceed the model's by this factor departs from it."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """One known departure: the stages it looks at and what their figures must show."""

    name: str
    stages: tuple[str, ...]
    top_op: str = ""
    """A regular expression the stage's longest op must match ("" matches any)."""
    min_flops_ratio: float = 0.0
    min_bytes_ratio: float = 0.0
    min_top_op_count: int = 0

    def match(self, figure: StageFigures) -> dict[str, object] | None:
        """The figures the rule rests on (with the ``top_op`` match's groups), None where the stage does not show it."""
        if figure.stage not in self.stages or figure.top_op_count < self.min_top_op_count:
            return None
        if self.min_flops_ratio and (figure.flops_ratio or 0.0) < self.min_flops_ratio:
            return None
        if self.min_bytes_ratio and (figure.bytes_ratio or 0.0) < self.min_bytes_ratio:
            return None
        found = re.search(self.top_op, figure.top_op) if self.top_op else None
        if self.top_op and found is None:
            return None
        groups = {name: int(value) for name, value in (found.groupdict() if found else {}).items()}
        return {"top_op": figure.top_op, "ops": figure.ops, "count": figure.top_op_count, **groups}


RULES: tuple[Rule, ...] = (
    Rule(
        "per_token_gemm",
        PROJECTIONS,
        # a weight operand batched like the input, and at most 16 rows a GEMM: the weight expanded per position
        top_op=r"aten::bmm \[\[(?P<batch>\d+),(?P<rows>[1-9]|1[0-6]),(?P<inner>\d+)\],\[(?P=batch),(?P=inner),\d+\]\]",
    ),
    Rule(
        "padded_gemm",
        PROJECTIONS,
        min_flops_ratio=2.0,
    ),
    Rule(
        "many_small_ops",
        ("qkv_projection", "scores", "mask_softmax", "pv", "out_projection"),
        min_top_op_count=8,
    ),
)


def first_match(figure: StageFigures) -> tuple[Rule, dict[str, object]] | None:
    """The first rule this stage shows, with the figures it rests on."""
    for rule in RULES:
        found = rule.match(figure)
        if found is not None:
            return rule, found
    return None


def departs(figure: StageFigures) -> bool:
    """Whether a stage ran more FLOPs or bytes than the model says (by :data:`DEPARTURE`)."""
    return any(ratio is not None and ratio >= DEPARTURE for ratio in (figure.flops_ratio, figure.bytes_ratio))
