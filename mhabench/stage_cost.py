"""The cost model stage by stage: what each stage of the layer should cost, so a measured stage can be held to it.

:mod:`mhabench.cost` prices a call as two parts (projections, attention). To say *where* an implementation
spends beyond the model, the same figures are split into the stages a user knows (docs/stages.md):

- ``qkv_projection``: the Q, K and V GEMMs (one packed GEMM or three);
- ``scores``: QKᵀ of a materialized layout; ``mask_softmax``: the passes over the scores (scale, mask,
  softmax, K/V repeated to every head); ``pv``: P·V;
- ``attention``: one fused attention kernel (SDPA, flash, flex) in place of the three above;
- ``out_projection``: the W_o GEMM; ``layout``: copies that only move data (head merge, nested copies);
- ``other``: whatever no stage rule claims (the model prices nothing there).

The split is exact: the stages of a model add up to its ``flops`` and ``bytes_moved`` (a test checks every
registered model). Train-mode and decode workloads are split with the forward call's shares.
"""

from __future__ import annotations

import dataclasses

from mhabench.cost import CostModel, Workload, gemm_bytes

STAGES = ("qkv_projection", "scores", "mask_softmax", "pv", "attention", "out_projection", "layout", "other")
"""Every stage, in the order data flows through the layer."""

STAGE_LABELS = {
    "qkv_projection": "QKV projection",
    "scores": "scores (QKᵀ)",
    "mask_softmax": "mask/softmax",
    "pv": "P·V",
    "attention": "attention kernel",
    "out_projection": "output projection",
    "layout": "layout copies",
    "other": "other ops and Python",
}
"""How a stage is named to a user."""


@dataclasses.dataclass(frozen=True)
class StageCost:
    """The model's FLOPs and bytes for one stage of one call."""

    flops: int
    bytes_moved: int


def stage_costs(model: CostModel, w: Workload) -> dict[str, StageCost]:
    """The model's figures per stage for ``w`` (stages it prices nothing in are absent)."""
    cost = model(w)
    forward = dataclasses.replace(w, train=False)
    e = w.element_bytes
    out_flops, out_bytes, layout_bytes = _projection_split(model, forward)
    forward_cost = model(forward) if w.train else cost
    scale_flops = cost.proj_flops / forward_cost.proj_flops if forward_cost.proj_flops else 0.0
    scale_bytes = cost.proj_bytes / forward_cost.proj_bytes if forward_cost.proj_bytes else 0.0
    out_flops, out_bytes, layout_bytes = (
        round(out_flops * scale_flops),
        round(out_bytes * e * scale_bytes),
        round(layout_bytes * e * scale_bytes),
    )
    stages = {
        "qkv_projection": StageCost(cost.proj_flops - out_flops, cost.proj_bytes - out_bytes - layout_bytes),
        "out_projection": StageCost(out_flops, out_bytes),
    }
    attention = _attention_split(model, w, cost.attn_flops, cost.attn_bytes, forward_cost.attn_bytes)
    for stage, figure in attention.items():
        stages[stage] = figure
    if layout_bytes:
        previous = stages.get("layout", StageCost(0, 0))
        stages["layout"] = StageCost(previous.flops, previous.bytes_moved + layout_bytes)
    return stages


def _projection_split(model: CostModel, w: Workload) -> tuple[int, int, int]:
    """(W_o FLOPs, W_o elements, head-merge copy elements) of a forward call; the rest of the projections is QKV."""
    if model.name == "full_dim_heads":
        wide = w.heads * w.d_model
        return 2 * w.tokens * wide * w.d_model, gemm_bytes(w.tokens, wide, w.d_model), 2 * w.tokens * wide
    merge_copy = 2 * w.tokens * w.q_dim if model.materializes_scores else 0
    return 2 * w.tokens * w.q_dim * w.d_model, gemm_bytes(w.tokens, w.q_dim, w.d_model), merge_copy


def _attention_split(
    model: CostModel, w: Workload, attn_flops: int, attn_bytes: int, forward_attn_bytes: int
) -> dict[str, StageCost]:
    """Attention as one fused kernel, or as scores, mask/softmax and P·V where the model materializes them."""
    e = w.element_bytes
    scale = attn_bytes / forward_attn_bytes if forward_attn_bytes else 1.0
    if not model.materializes_scores:
        copies = 0
        if model.name == "nested":  # Q, K and V copied out contiguous (read + write)
            copies = round(2 * w.tokens * (w.q_dim + 2 * w.kv_dim) * e * scale)
        split = {"attention": StageCost(attn_flops, attn_bytes - copies)}
        return split | ({"layout": StageCost(0, copies)} if copies else {})
    side = w.tokens * w.q_dim + w.batch * w.heads * w.kv_len * w.head_dim  # Q (or O) and K (or V) per head
    scores_bytes = round((side + w.score_elements) * e * scale)
    pv_bytes = round((side + w.score_elements) * e * scale)
    pv_flops = attn_flops * 2 * w.score_elements * w.head_dim // max(_forward_attn_flops(model, w), 1)
    return {
        "scores": StageCost(attn_flops - pv_flops, scores_bytes),
        "mask_softmax": StageCost(0, attn_bytes - scores_bytes - pv_bytes),
        "pv": StageCost(pv_flops, pv_bytes),
    }


def _forward_attn_flops(model: CostModel, w: Workload) -> int:
    return model.flops(dataclasses.replace(w, train=False))[1]
