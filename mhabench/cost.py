"""The cost model: FLOPs and minimum bytes moved for one attention call, per implementation.

One place, documented in docs/cost-model.md; the formulas follow the checked performance model the project grew from.

Symbols: b batch, n query tokens, L key/value length (= n in prefill), D d_model, h heads,
n_kv key/value heads, d_k head dim (D / h unless the scenario sets ``head_dim``), q_dim = h·d_k the
query width (= D unless d_k is set apart), e bytes per element. A multiply-add counts as 2 FLOPs.

FLOPs (executed, like FlashAttention's benchmarks and ``torch.utils.flop_counter``):
- projections: Q and O 2·b·n·D·q_dim each, K and V 2·b·n·D·(n_kv·d_k) each (8·b·n·D² for MHA);
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
- ``nested``: ``fused`` plus one contiguous copy of Q, K and V (read + write), which nested SDPA needs.
- ``fused_fp8``: ``fused`` with e4m3 (1-byte) operands: x and the packed Q/K/V each read once for
  their amax and once to quantize them, the GEMMs reading e4m3 and writing bf16, the attention
  reading and writing e4m3.
- ``per_head``: h + 2·n_kv thin GEMMs each re-reading all of x; per-head materialized attention;
  the concat copy of the head outputs.

Ablations (FLOPs differ from the standard layer, so each has its own FLOPs line):
- ``shared_qk`` (W_K := W_Q): no K GEMM — projections 2·b·n·D·(2·q_dim + n_kv·d_k); bytes as
  ``materialized`` without the K GEMM.
- ``unscaled``: ``materialized`` without the scale pass over the scores.
- ``additive`` (vᵀ·tanh(q_i + k_j)): per score element d_k adds, d_k tanh and d_k multiply-adds
  with v (4·d_k FLOPs, tanh counted as one op like softmax's exp) plus P·V (2·d_k): 6·b·h·n·L·d_k.
  Bytes: the broadcast add writes the b·h·n·L·d_k intermediate, tanh reads and writes it, the
  v-contraction reads it and writes the scores; then mask, softmax and P·V as ``materialized``.
- ``full_dim_heads`` (h heads of width D): projections 8·b·n·h·D², attention 4·b·h·n·L·D; bytes as
  ``fused`` with every width multiplied by h.

Phases and modes are workload shapes, not separate models:
- decode: n = 1 query per sequence against L = cache length + 1 keys. Weights are read once per
  GEMM whatever the batch, so projection intensity ≈ 2·b/e; each query head reads its K/V cache,
  so attention intensity ≈ 2·G/e (G = h / n_kv) independent of the batch (``fused``; ``naive``
  copies K/V to every query head and loses the G).
- train (forward + backward): backward FLOPs are 2× forward for the GEMMs and 2.5× for attention
  (FlashAttention's and FlopCounterMode's convention for SDPA: the backward recomputes QKᵀ; a
  materialized backward that keeps P executes 2×, so this counts its attention backward as
  FLOP-for-FLOP comparable work, not as executed work). Backward bytes are 2× forward (each
  backward kernel mirrors a forward one: dX and dW per GEMM, dP/dV per P·V, dQ/dK per QKᵀ) and
  the softmax count triples likewise. The
  predicted peak adds the saved activations (≈ the forward peak again) and the gradients of the
  input and the weight matrices.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Literal

from mhabench.pattern import PLAIN, AttentionPattern

SOFTMAX_FLOPS_PER_SCORE = 5


@dataclasses.dataclass(frozen=True)
class Workload:
    """The shape of one attention call. ``seq_len`` queries attend to ``kv_len`` keys.

    Every field is resolved by whoever builds it (a case: :meth:`mhabench.scenario.cases.Case.workload`), so the
    formulas read one value per idea: the head width and the pattern, never a default to fill in.
    """

    batch: int
    seq_len: int
    kv_len: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    """Width of one head (d_model / heads unless the scenario sets it apart)."""
    element_bytes: int
    pattern: AttentionPattern = PLAIN
    """What each query sees (:mod:`mhabench.pattern`)."""
    train: bool = False
    decode: bool = False
    """One new query per sequence against a cache of ``kv_len`` keys (a window: only the keys it sees)."""

    @property
    def causal(self) -> bool:
        """The call skips later keys as a causal mask does: a decode step's one query sees its whole cache, so a
        decode call is never causal whatever the case's mask."""
        return self.pattern.causal and not self.decode

    @property
    def q_dim(self) -> int:
        """Width of all query heads together: the Q projection's output and W_o's input (d_model for MHA)."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def tokens(self) -> int:
        """Query tokens computed: b·n, padding included (what the formulas price)."""
        return self.batch * self.seq_len

    @property
    def real_tokens(self) -> int:
        """Query tokens that are not padding: what a throughput counts (tokens per second, per joule)."""
        if self.pattern.lengths is None:
            return self.tokens
        return sum(self.pattern.real_segments(self.batch, self.seq_len))

    @property
    def score_elements(self) -> int:
        """b·h·n·L: the size of the score matrix summed over batch and heads."""
        return self.batch * self.heads * self.seq_len * self.kv_len

    @property
    def computed_pairs(self) -> int:
        """b·n·L: the (query, key) pairs a dense kernel computes, per head."""
        return self.batch * self.seq_len * self.kv_len

    @property
    def visible_fraction(self) -> float:
        """Share of the computed (query, key) pairs the mask allows: what a mask-skipping kernel executes.

        Prefill counts per segment (:meth:`AttentionPattern.visible_pairs`); a decode step (one query
        against L keys) sees what the last position of an L-token sequence sees.
        """
        if self.decode:
            return self.pattern.last_query_keys(self.kv_len) / self.kv_len
        rows = self.pattern.rows(self.batch, self.seq_len)
        allowed = sum(self.pattern.visible_pairs(segment) for row in rows for segment in row)
        return allowed / self.computed_pairs

    @property
    def useful_pair_fraction(self) -> float:
        """Share of the computed pairs that the mask allows between real tokens (padding excluded)."""
        if self.pattern.lengths is None:
            return self.visible_fraction
        real = self.pattern.real_segments(self.batch, self.seq_len)
        return sum(self.pattern.visible_pairs(segment) for segment in real) / self.computed_pairs

    @property
    def real_token_fraction(self) -> float:
        """Share of the computed tokens that are real (1 without padding)."""
        return sum(self.pattern.real_segments(self.batch, self.seq_len)) / self.tokens

    @property
    def padding_pair_fraction(self) -> float:
        """Share of the computed pairs that involve a padding query or key (0 without padding)."""
        real_per_row = self.pattern.real_tokens_per_row(self.batch, self.seq_len)
        return sum(self.seq_len**2 - real**2 for real in real_per_row) / self.computed_pairs


@dataclasses.dataclass(frozen=True)
class Cost:
    """Model figures for one call; ``proj_*`` are the four GEMMs, ``attn_*`` the rest.

    In train mode every figure covers forward + backward; ``backward_flops`` is the backward share.
    """

    proj_flops: int
    attn_flops: int
    softmax_flops: int
    useful_flops: int
    proj_bytes: int
    attn_bytes: int
    predicted_peak_bytes: int
    backward_flops: int = 0
    padding_share: float = 0.0
    """Share of ``flops`` spent on padding tokens (their projections and every pair they take part in)."""

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


def _standard_flops(w: Workload) -> tuple[int, int]:
    """``(projection, attention)`` FLOPs of standard multi-head attention."""
    return 2 * w.tokens * w.d_model * (2 * w.q_dim + 2 * w.kv_dim), 4 * w.score_elements * w.head_dim


def _shared_qk_flops(w: Workload) -> tuple[int, int]:
    """No K GEMM: the queries serve as keys."""
    return 2 * w.tokens * w.d_model * (2 * w.q_dim + w.kv_dim), 4 * w.score_elements * w.head_dim


def _additive_flops(w: Workload) -> tuple[int, int]:
    """Per score element: d_k adds, d_k tanh, d_k multiply-adds with v; then P·V."""
    return _standard_flops(w)[0], 6 * w.score_elements * w.head_dim


def _full_dim_heads_flops(w: Workload) -> tuple[int, int]:
    """h heads each of width D."""
    return 8 * w.tokens * w.heads * w.d_model**2, 4 * w.score_elements * w.d_model


def _materialized_attn_elements(w: Workload, scale_pass: bool = True) -> int:
    """Elements moved by QKᵀ, the elementwise passes, softmax and P·V over every (batch, head).

    Every query head reads its K and V once, grouped or not: there is no cache reuse in the model.
    """
    q_and_out = 2 * w.tokens * w.q_dim
    kv_reads = 2 * w.batch * w.heads * w.kv_len * w.head_dim
    # QKᵀ write, scale, softmax, P·V read, mask
    score_passes = 1 + (2 if scale_pass else 0) + 2 + 1 + (2 if w.causal else 0)
    return q_and_out + kv_reads + score_passes * w.score_elements


def _kv_repeat_elements(w: Workload) -> int:
    """repeat_interleave of K and V to every query head (GQA/MQA in the materialized layouts)."""
    return 2 * w.batch * (w.kv_heads + w.heads) * w.kv_len * w.head_dim if w.kv_heads != w.heads else 0


def _out_proj_elements(w: Workload) -> int:
    """The head-merge/concat copy plus the W_o GEMM."""
    return 2 * w.tokens * w.q_dim + gemm_bytes(w.tokens, w.q_dim, w.d_model)


def _fused(w: Workload) -> tuple[int, int, int]:
    """No head-merge copy: SDPA writes its output token-major, so merging the heads is a view."""
    qkv_width = w.q_dim + 2 * w.kv_dim
    proj = gemm_bytes(w.tokens, w.d_model, qkv_width) + gemm_bytes(w.tokens, w.q_dim, w.d_model)
    attn = 2 * w.tokens * w.q_dim + 2 * w.batch * w.kv_heads * w.kv_len * w.head_dim
    peak = w.tokens * qkv_width + _io_elements(w)
    return proj, attn, peak


def _nested(w: Workload) -> tuple[int, int, int]:
    """``fused`` plus the contiguous copies of Q, K and V that nested SDPA needs (read + write each)."""
    proj, attn, peak = _fused(w)
    qkv = w.tokens * (w.q_dim + 2 * w.kv_dim)
    return proj, attn + 2 * qkv, peak + qkv


FP8_BYTES = 1


def _fused_fp8_bytes(w: Workload) -> tuple[int, int, int]:
    """``fused_fp8``'s (projection, attention, peak) bytes: bf16 (e bytes) at the edges, e4m3 (1 byte) inside.

    Projections: x read for its amax and again to quantize it (writing e4m3), the QKV GEMM on e4m3
    operands writing bf16, that output read for its amax and again to quantize it, the W_o GEMM on
    e4m3 operands writing bf16. Attention reads Q/K/V and writes O, all e4m3.
    """
    e, tokens, width = w.element_bytes, w.tokens, w.q_dim + 2 * w.kv_dim
    quantize_x = 2 * e * tokens * w.d_model + FP8_BYTES * tokens * w.d_model
    qkv_gemm = FP8_BYTES * (tokens * w.d_model + w.d_model * width) + e * tokens * width
    quantize_qkv = 2 * e * tokens * width + FP8_BYTES * tokens * width
    out_gemm = FP8_BYTES * (tokens * w.q_dim + w.q_dim * w.d_model) + e * tokens * w.d_model
    kv = 2 * w.batch * w.kv_heads * w.kv_len * w.head_dim
    attn = FP8_BYTES * (2 * tokens * w.q_dim + kv)
    peak = e * tokens * (2 * w.d_model + width) + FP8_BYTES * tokens * (width + w.q_dim)
    return quantize_x + qkv_gemm + quantize_qkv + out_gemm, attn, peak


def _fused_fp8(w: Workload) -> tuple[int, int, int]:
    """:func:`_fused_fp8_bytes` in the case's elements (``CostModel`` multiplies by e; rounded down to whole ones)."""
    proj, attn, peak = _fused_fp8_bytes(w)
    return proj // w.element_bytes, attn // w.element_bytes, peak // w.element_bytes


def _io_elements(w: Workload) -> int:
    """The input, the heads' merged output (q_dim wide) and the layer's output, alive together at W_o."""
    return w.tokens * (2 * w.d_model + w.q_dim)


def _materialized(w: Workload) -> tuple[int, int, int]:
    qkv_width = w.q_dim + 2 * w.kv_dim
    proj = 3 * w.tokens * w.d_model + w.d_model * qkv_width + w.tokens * qkv_width
    proj += _out_proj_elements(w)
    attn = _materialized_attn_elements(w) + _kv_repeat_elements(w)
    peak = w.tokens * qkv_width + 2 * w.score_elements + _io_elements(w)
    return proj, attn, peak


def _per_head(w: Workload) -> tuple[int, int, int]:
    qkv_width = w.q_dim + 2 * w.kv_dim
    gemm_count = w.heads + 2 * w.kv_heads
    proj = gemm_count * w.tokens * w.d_model + w.d_model * qkv_width + w.tokens * qkv_width
    proj += _out_proj_elements(w)
    attn = _materialized_attn_elements(w)
    per_head_scores = w.score_elements // w.heads
    peak = 2 * per_head_scores + w.tokens * (2 * w.d_model + 2 * w.q_dim)  # x, head outputs, their concat, out
    return proj, attn, peak


def _shared_qk(w: Workload) -> tuple[int, int, int]:
    qv_width = w.q_dim + w.kv_dim
    proj = 2 * w.tokens * w.d_model + w.d_model * qv_width + w.tokens * qv_width + _out_proj_elements(w)
    peak = w.tokens * qv_width + 2 * w.score_elements + _io_elements(w)
    return proj, _materialized_attn_elements(w), peak


def _unscaled(w: Workload) -> tuple[int, int, int]:
    proj, _, peak = _materialized(w)
    return proj, _materialized_attn_elements(w, scale_pass=False) + _kv_repeat_elements(w), peak


def _additive(w: Workload, block_elements: int) -> tuple[int, int, int]:
    proj, _, _ = _materialized(w)
    intermediate = w.score_elements * w.head_dim
    q_and_out = 2 * w.tokens * w.q_dim
    kv_reads = 2 * w.batch * w.heads * w.kv_len * w.head_dim
    # add write, tanh read + write, v-contraction read; then scores write, mask, softmax, P·V read
    score_passes = 1 + (2 if w.causal else 0) + 2 + 1
    attn = q_and_out + kv_reads + 4 * intermediate + score_passes * w.score_elements + _kv_repeat_elements(w)
    peak = (w.q_dim + 2 * w.kv_dim) * w.tokens + min(intermediate, block_elements) + 2 * w.score_elements
    return proj, attn, peak + _io_elements(w)


def _full_dim_heads(w: Workload) -> tuple[int, int, int]:
    wide = w.heads * w.d_model
    proj = gemm_bytes(w.tokens, w.d_model, 3 * wide) + 2 * w.tokens * wide + gemm_bytes(w.tokens, wide, w.d_model)
    attn = 2 * w.tokens * wide + 2 * w.batch * w.heads * w.kv_len * w.d_model
    peak = w.tokens * (3 * wide + 2 * wide + w.d_model)
    return proj, attn, peak


def score_pass_elements(w: Workload) -> int:
    """Extra passes over the b·h·n·L scores of a materialized layout beyond plain causal attention: the
    mask's masked_fill where a causal one is not already counted, softcap's divide, tanh and multiply
    (read + write each), ALiBi's add (read + write)."""
    pattern = w.pattern
    masked = not w.decode and not w.causal and pattern.needs_mask
    passes = (2 if masked else 0) + {"softcap": 6, "alibi": 2}.get(pattern.score_mod, 0)
    return passes * w.score_elements


def dense_mask_bytes(w: Workload, converted: bool) -> int:
    """A mask tensor other than plain causal, per (query, key) pair of every distinct row (one row unless
    documents differ per row): a materialized layout reads the booleans (1 byte) and an ALiBi bias per head;
    SDPA (``converted``) turns the booleans into an additive mask in the element type on every call (reads
    1 byte, writes e, its kernel reads e), or with ALiBi reads the additive bias built once."""
    pattern = w.pattern
    if pattern.plain or w.decode:  # decode: the window is a slice of the cache
        return 0
    rows = w.batch if pattern.lengths is not None else 1
    pairs, e = rows * w.seq_len * w.kv_len, w.element_bytes
    if pattern.score_mod == "alibi":
        booleans = pairs if pattern.needs_mask and not converted else 0
        return pairs * w.heads * e + booleans
    if not pattern.needs_mask:  # a soft-cap alone: no tensor
        return 0
    return pairs * (1 + 2 * e) if converted else pairs


def _standard_weights(w: Workload) -> int:
    """Elements of W_Q, W_K, W_V and W_O (no biases)."""
    return w.d_model * (2 * w.q_dim + 2 * w.kv_dim)


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Prices one call of an implementation: ``model(workload) -> Cost``.

    Built from three building blocks: ``flops`` gives (projection, attention) FLOPs, ``elements``
    (projection, attention, predicted peak) elements moved, ``weights`` the weight-matrix elements
    (their gradients count towards the train-mode peak). A registry entry carries one of these.
    """

    name: str
    elements: Callable[[Workload], tuple[int, int, int]]
    flops: Callable[[Workload], tuple[int, int]] = _standard_flops
    weights: Callable[[Workload], int] = _standard_weights
    materializes_scores: bool = False
    """Whether the model's attention bytes write the b·h·n·L score matrix and read it back (the unfused
    layouts): what ``mhabench advise`` says of a row, so it is said from the same model that priced the row."""
    dense_mask: Literal["", "read", "converted"] = ""
    """How a mask other than plain causal reaches the attention as a dense tensor: ``read`` by the
    materialized layouts (booleans, an ALiBi bias), ``converted`` by SDPA's ``attn_mask`` (booleans
    become an additive mask each call: :func:`dense_mask_bytes`); "" for block masks and kernels' own
    window arguments (flex, flash_attn, xformers), which read no such tensor."""

    def __call__(self, w: Workload) -> Cost:
        """FLOPs and bytes of one call (forward, or forward + backward when ``w.train``)."""
        proj_flops, attn_flops = self.flops(w)
        proj_elements, attn_elements, peak_elements = self.elements(w)
        e = w.element_bytes
        if self.materializes_scores:
            attn_elements += score_pass_elements(w)
        mask_bytes = dense_mask_bytes(w, self.dense_mask == "converted") if self.dense_mask else 0
        forward = Cost(
            proj_flops=proj_flops,
            attn_flops=attn_flops,
            softmax_flops=SOFTMAX_FLOPS_PER_SCORE * w.score_elements,
            useful_flops=round(proj_flops * w.real_token_fraction + attn_flops * w.useful_pair_fraction),
            proj_bytes=proj_elements * e,
            attn_bytes=attn_elements * e + mask_bytes,
            predicted_peak_bytes=peak_elements * e + mask_bytes,
            padding_share=(proj_flops * (1 - w.real_token_fraction) + attn_flops * w.padding_pair_fraction)
            / (proj_flops + attn_flops),
        )
        return _with_backward(forward, self.weights(w), w) if w.train else forward


FUSED = CostModel("fused", _fused)
"""One attention kernel that takes its mask as arguments or a block mask (flex, flash_attn, xformers)."""
FUSED_DENSE_MASK = CostModel("fused", _fused, dense_mask="converted")
"""``fused`` through SDPA: the same bytes, plus the dense ``attn_mask`` it reads for a mask that
``is_causal`` cannot express. Its label is ``fused`` (rows and reports name the layout, not the mask route)."""
FUSED_FP8 = CostModel("fused_fp8", _fused_fp8)
"""``fused`` in e4m3 with bf16 edges: the same FLOPs, the bytes of its quantizations and e4m3 operands."""
NESTED = CostModel("nested", _nested)
"""Documents as nested jagged sequences into SDPA: no mask tensor, Q/K/V copied out contiguous."""
MATERIALIZED = CostModel("materialized", _materialized, materializes_scores=True, dense_mask="read")
PER_HEAD = CostModel("per_head", _per_head, materializes_scores=True, dense_mask="read")
UNSCALED = CostModel("unscaled", _unscaled, materializes_scores=True, dense_mask="read")
SHARED_QK = CostModel(
    "shared_qk",
    _shared_qk,
    _shared_qk_flops,
    lambda w: w.d_model * (2 * w.q_dim + w.kv_dim),
    materializes_scores=True,
)
FULL_DIM_HEADS = CostModel(
    "full_dim_heads", _full_dim_heads, _full_dim_heads_flops, lambda w: 4 * w.heads * w.d_model**2
)


def additive_model(block_elements: int) -> CostModel:
    """The additive ablation builds its tanh intermediate in blocks of at most ``block_elements``."""
    return CostModel(
        "additive",
        lambda w: _additive(w, block_elements),
        _additive_flops,
        lambda w: _standard_weights(w) + w.q_dim,  # plus the score vectors v (h of d_k each)
        materializes_scores=True,
    )


def _with_backward(forward: Cost, weight_elements: int, w: Workload) -> Cost:
    """Forward + backward: GEMMs 2×, attention 2.5× (FLOPs), every kernel's bytes 2× (see module doc)."""
    backward_attn = 5 * forward.attn_flops // 2
    backward_flops = 2 * forward.proj_flops + backward_attn
    proj_useful = round(forward.proj_flops * w.real_token_fraction)
    attn_useful = forward.useful_flops - proj_useful
    gradients = (w.tokens * w.d_model + weight_elements) * w.element_bytes
    return Cost(
        proj_flops=3 * forward.proj_flops,
        attn_flops=forward.attn_flops + backward_attn,
        softmax_flops=3 * forward.softmax_flops,
        useful_flops=3 * proj_useful + 7 * attn_useful // 2,
        proj_bytes=3 * forward.proj_bytes,
        attn_bytes=3 * forward.attn_bytes,
        predicted_peak_bytes=2 * forward.predicted_peak_bytes + gradients,
        backward_flops=backward_flops,
        padding_share=forward.padding_share,
    )


_DEPRECATED_NAMES = {"SDPA": "FUSED_DENSE_MASK"}
"""Old names plugins may still import, kept working with a warning (``SDPA`` before issue 27)."""


def __getattr__(name: str) -> CostModel:
    """``mhabench.cost.SDPA`` still resolves (a plugin written against it keeps running) but warns once per use."""
    if name in _DEPRECATED_NAMES:
        new_name = _DEPRECATED_NAMES[name]
        warnings.warn(
            f"mhabench.cost.{name} is deprecated: use mhabench.cost.{new_name}", DeprecationWarning, stacklevel=2
        )
        return globals()[new_name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
