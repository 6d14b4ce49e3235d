"""The departures ``mhabench explain`` knows, as data: which stage, what the figures must show, what it means.

Each rule looks at one stage of a row's breakdown (:class:`mhabench.results.stages.StageFigures`): the longest
op's name and shapes (a regular expression), how far its FLOPs and bytes are from the model's, how many ops it
ran. The first rule that matches says what ran; a remedy is added where the implementation is one whose cause is
known. A departure no rule matches is listed with its numbers, never guessed (docs/stages.md).
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
    """One known departure. ``says`` is formatted with the stage's figures and the ``top_op`` match's groups."""

    name: str
    stages: tuple[str, ...]
    says: str
    top_op: str = ""
    """A regular expression the stage's longest op must match ("" matches any)."""
    min_flops_ratio: float = 0.0
    min_bytes_ratio: float = 0.0
    min_top_op_count: int = 0

    def match(self, figure: StageFigures) -> dict[str, object] | None:
        """The figures to word the rule with, or None when the stage does not show it."""
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
        "it ran as {batch:,} batched GEMMs of {rows} row(s) each, one per token position (`{top_op}`)",
        # a weight operand batched like the input, and at most 16 rows a GEMM: the weight expanded per position
        top_op=r"aten::bmm \[\[(?P<batch>\d+),(?P<rows>[1-9]|1[0-6]),(?P<inner>\d+)\],\[(?P=batch),(?P=inner),\d+\]\]",
    ),
    Rule(
        "padded_gemm",
        PROJECTIONS,
        "its GEMM kernel `{top_op}` computed padding: a GEMM on thin (one-row) matrices filled out to the "
        "kernel's tile, as one GEMM per token runs",
        min_flops_ratio=2.0,
    ),
    Rule(
        "many_small_ops",
        ("qkv_projection", "scores", "mask_softmax", "pv", "out_projection"),
        "it ran {ops} ops in this stage (`{top_op}` ×{count}): one small op per head, each too small to fill the "
        "device",
        min_top_op_count=8,
    ),
)

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


def first_match(figure: StageFigures) -> tuple[Rule, dict[str, object]] | None:
    """The first rule this stage shows, with its wording figures."""
    for rule in RULES:
        found = rule.match(figure)
        if found is not None:
            return rule, found
    return None


def departs(figure: StageFigures) -> bool:
    """Whether a stage ran more FLOPs or bytes than the model says (by :data:`DEPARTURE`)."""
    return any(ratio is not None and ratio >= DEPARTURE for ratio in (figure.flops_ratio, figure.bytes_ratio))
