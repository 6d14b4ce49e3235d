"""The cost model: FLOPs and minimum bytes moved for one attention forward, per implementation.

One place, documented in README ("Cost model"); formulas follow ../shared/reference/performance-model.md.

Symbols: b batch, n query tokens, L key/value length (= n in prefill), D d_model, h heads,
n_kv key/value heads, d_k head dim, e bytes per element. A multiply-add counts as 2 FLOPs.

FLOPs (executed, like FlashAttention's benchmarks and ``torch.utils.flop_counter``):
- projections: Q and O 2·b·n·D² each, K and V 2·b·n·D·(n_kv·d_k) each (8·b·n·D² for MHA);
- attention: QKᵀ and P·V 2·b·h·n·L·d_k each (4·b·n²·D for MHA prefill);
- softmax: 5 ops per score element, reported separately and *not* in ``flops``;
- useful: with a causal mask only the visible (query, key) pairs count — about half in prefill.

Bytes moved: each kernel reads its inputs from and writes its outputs to main memory once, with no
cache reuse between kernels; weights are read once per GEMM that uses them.
- ``fused``: one packed QKV GEMM, Q/K/V read and O written once by the attention kernel,
  the head-merge copy, the W_o GEMM.
- ``materialized``: three GEMMs each re-reading x; the n×L scores written by QKᵀ, passed over by the
  1/√d_k scale, the causal mask (when causal) and softmax (read + write each), read again by P·V;
  K/V copied to every query head when grouped.
- ``per_head``: h + 2·n_kv thin GEMMs each re-reading all of x; per-head materialized attention;
  the concat copy of the head outputs.
"""

from __future__ import annotations

import dataclasses

from mhabench.impls.registry import Traffic

SOFTMAX_FLOPS_PER_SCORE = 5


@dataclasses.dataclass(frozen=True)
class Workload:
    """The shape of one attention call. ``seq_len`` queries attend to ``kv_len`` keys."""

    batch: int
    seq_len: int
    kv_len: int
    d_model: int
    heads: int
    kv_heads: int
    causal: bool
    element_bytes: int

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    @property
    def score_elements(self) -> int:
        """b·h·n·L: the size of the score matrix summed over batch and heads."""
        return self.batch * self.heads * self.seq_len * self.kv_len

    @property
    def visible_fraction(self) -> float:
        """Share of (query, key) pairs a causal mask leaves visible (queries end-aligned)."""
        if not self.causal:
            return 1.0
        n, kv_len = self.seq_len, self.kv_len
        hidden = n * (n - 1) / 2
        return (n * kv_len - hidden) / (n * kv_len)


@dataclasses.dataclass(frozen=True)
class Cost:
    """Model figures for one forward call; ``proj_*`` are the four GEMMs, ``attn_*`` the rest."""

    proj_flops: int
    attn_flops: int
    softmax_flops: int
    useful_flops: int
    proj_bytes: int
    attn_bytes: int
    predicted_peak_bytes: int

    @property
    def flops(self) -> int:
        return self.proj_flops + self.attn_flops

    @property
    def bytes_moved(self) -> int:
        return self.proj_bytes + self.attn_bytes

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes_moved

    @property
    def proj_intensity(self) -> float:
        return self.proj_flops / self.proj_bytes

    @property
    def attn_intensity(self) -> float:
        return self.attn_flops / self.attn_bytes


def gemm_bytes(rows: int, inner: int, cols: int) -> int:
    """Elements one (rows × inner) @ (inner × cols) GEMM reads and writes."""
    return rows * inner + inner * cols + rows * cols


def _flops(w: Workload) -> tuple[int, int, int, int]:
    proj = 2 * w.tokens * w.d_model * (2 * w.d_model + 2 * w.kv_dim)
    attn = 4 * w.score_elements * w.head_dim
    softmax = SOFTMAX_FLOPS_PER_SCORE * w.score_elements
    useful = proj + round(attn * w.visible_fraction)
    return proj, attn, softmax, useful


def _materialized_attn_elements(w: Workload) -> int:
    """Elements moved by QKᵀ, the elementwise passes, softmax and P·V over every (batch, head).

    Every query head reads its K and V once, grouped or not: there is no cache reuse in the model.
    """
    q_and_out = 2 * w.tokens * w.d_model
    kv_reads = 2 * w.batch * w.heads * w.kv_len * w.head_dim
    score_passes = 1 + 2 + 2 + 1 + (2 if w.causal else 0)  # QKᵀ write, scale, softmax, P·V read, mask
    return q_and_out + kv_reads + score_passes * w.score_elements


def _out_proj_elements(w: Workload) -> int:
    """The head-merge/concat copy plus the W_o GEMM."""
    return 2 * w.tokens * w.d_model + gemm_bytes(w.tokens, w.d_model, w.d_model)


def _fused(w: Workload) -> tuple[int, int, int]:
    qkv_width = w.d_model + 2 * w.kv_dim
    proj = gemm_bytes(w.tokens, w.d_model, qkv_width) + _out_proj_elements(w)
    attn = 2 * w.tokens * w.d_model + 2 * w.batch * w.kv_heads * w.kv_len * w.head_dim
    peak = w.tokens * qkv_width + 3 * w.tokens * w.d_model
    return proj, attn, peak


def _materialized(w: Workload) -> tuple[int, int, int]:
    qkv_width = w.d_model + 2 * w.kv_dim
    proj = 3 * w.tokens * w.d_model + w.d_model * qkv_width + w.tokens * qkv_width
    proj += _out_proj_elements(w)
    attn = _materialized_attn_elements(w)
    if w.kv_heads != w.heads:  # repeat_interleave of K and V to every query head
        attn += 2 * w.batch * (w.kv_heads + w.heads) * w.kv_len * w.head_dim
    peak = w.tokens * qkv_width + 2 * w.score_elements + 3 * w.tokens * w.d_model
    return proj, attn, peak


def _per_head(w: Workload) -> tuple[int, int, int]:
    qkv_width = w.d_model + 2 * w.kv_dim
    gemm_count = w.heads + 2 * w.kv_heads
    proj = gemm_count * w.tokens * w.d_model + w.d_model * qkv_width + w.tokens * qkv_width
    proj += _out_proj_elements(w)
    attn = _materialized_attn_elements(w)
    per_head_scores = w.score_elements // w.heads
    peak = 2 * per_head_scores + 4 * w.tokens * w.d_model
    return proj, attn, peak


_BYTES_MODELS = {"fused": _fused, "materialized": _materialized, "per_head": _per_head}


def estimate_cost(traffic: Traffic, w: Workload) -> Cost:
    """FLOPs and bytes of one forward call of an implementation whose traffic model is ``traffic``."""
    proj_flops, attn_flops, softmax_flops, useful_flops = _flops(w)
    proj_elements, attn_elements, peak_elements = _BYTES_MODELS[traffic](w)
    e = w.element_bytes
    return Cost(
        proj_flops=proj_flops,
        attn_flops=attn_flops,
        softmax_flops=softmax_flops,
        useful_flops=useful_flops,
        proj_bytes=proj_elements * e,
        attn_bytes=attn_elements * e,
        predicted_peak_bytes=peak_elements * e,
    )
