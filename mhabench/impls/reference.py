"""The float64 reference every implementation is checked against before it is timed.

Written independently of the implementations (einsum over explicit head axes, in float64) so that a
bug shared by ``naive`` and the others cannot hide.

It runs on the device of its input, so a CUDA case is checked on the GPU (float64 GEMMs run on the
FP64 units, far faster than a host) and never copies the case to host RAM. The scores are computed
in blocks of query rows, so besides the projections the reference holds at most about
2 × ``BLOCK_BYTES`` of scores (one block is b·h·block·L·8 bytes; softmax makes a second), whatever n.

Above ``SAMPLE_ABOVE_SCORES`` score elements (b·h·n·L) the check covers a deterministic random
subset of ``SAMPLE_ROWS`` (batch, row) pairs instead of every output row. A row is the unit because
W_o mixes the heads: one output row needs every head of that query, so heads cannot be sampled
separately. Each sampled batch element is projected on its own, so the reference then needs only
one sequence's keys and values at a time. :func:`reference_bytes` predicts the whole need.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from mhabench.cost import Workload
from mhabench.impls.fp8 import FP8_TOLERANCE
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import AttentionPattern, TokenTable, allowed, as_pattern, modify_scores, score_bias

BLOCK_BYTES = 256 * 2**20
SAMPLE_ABOVE_SCORES = 2**28
SAMPLE_ROWS = 512
SAMPLE_SEED = 0
FLOAT64_BYTES = 8

# Relative error (max |out − ref| / max |ref|) above which an implementation is wrong, not rounded. An
# implementation that computes in another dtype than its case's (``compute_dtype``: fp8 inside a bf16
# layer) is checked under that dtype's; e4m3's is derived from its precision (mhabench.impls.fp8).
TOLERANCE = {"float32": 1e-3, "float16": 1e-2, "bfloat16": 4e-2, "float8_e4m3fn": FP8_TOLERANCE}


@dataclasses.dataclass(frozen=True)
class RowSample:
    """The (batch, row) pairs of the output that are checked: ``values[i]`` is ``out[batch[i], row[i]]``."""

    batch_index: torch.Tensor
    row_index: torch.Tensor

    def take(self, output: torch.Tensor) -> torch.Tensor:
        """The sampled rows of a (b, n, D) output, as (k, D)."""
        device = output.device
        return output[self.batch_index.to(device), self.row_index.to(device)]


def sample_rows(batch: int, rows: int, count: int = SAMPLE_ROWS, seed: int = SAMPLE_SEED) -> RowSample:
    """``count`` distinct (batch, row) pairs drawn with a fixed seed, sorted, always with the first and last row.

    The last row sees the whole sequence under a causal mask, the first row only itself: both ends
    of the mask are always checked.
    """
    total = batch * rows
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.randperm(total, generator=generator)[: max(count - 2, 0)]
    flat = torch.unique(torch.cat([drawn, torch.tensor([0, total - 1])]))
    return RowSample(flat // rows, flat % rows)


@dataclasses.dataclass(frozen=True)
class Reference:
    """The expected output: every row (``rows`` None) or the sampled rows only."""

    values: torch.Tensor
    rows: RowSample | None = None

    def compared(self, output: torch.Tensor) -> torch.Tensor:
        """The part of ``output`` that ``values`` describes."""
        return output if self.rows is None else self.rows.take(output)


def _project(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, heads: int) -> torch.Tensor:
    """x (B, r, D) → (B, heads, r, d_k)."""
    out = x @ w if b is None else x @ w + b
    return out.unflatten(-1, (heads, -1)).transpose(1, 2)


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    queries: torch.Tensor,
    pattern: AttentionPattern,
    table: TokenTable,
    scale: float,
    block_bytes: int,
) -> torch.Tensor:
    """softmax(mod(q kᵀ·scale) + mask) v in blocks of query rows; q (B, h, r, d), k/v (B, kv, L, d).

    Grouped K/V heads are broadcast through a (kv, group) split of the query heads, never copied.
    ``queries`` holds each query row's token index among the keys; ``table`` the segments and
    positions of the B rows' tokens, from which :func:`mhabench.pattern.allowed` builds each block's mask.
    """
    batch, heads, rows, _ = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    grouped = q.unflatten(1, (kv_heads, heads // kv_heads))
    out = torch.empty_like(grouped)
    block = max(1, block_bytes // (batch * heads * kv_len * FLOAT64_BYTES))
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        scores = torch.einsum("bkgid,bkjd->bkgij", grouped[:, :, :, start:stop], k).mul_(scale)
        bias = score_bias(pattern, table, heads, queries[start:stop])
        scores = modify_scores(pattern, scores, None if bias is None else bias.unflatten(1, (kv_heads, -1)))
        visible = allowed(pattern, table, queries[start:stop])[:, None, None]
        scores.masked_fill_(~visible, float("-inf"))
        out[:, :, :, start:stop] = torch.einsum("bkgij,bkjd->bkgid", scores.softmax(dim=-1), v)
        del scores
    return out.flatten(1, 2)


def _rows_of(
    w: AttentionWeights,
    x: torch.Tensor,
    q_rows: torch.Tensor | None,
    heads: int,
    pattern: AttentionPattern,
    table: TokenTable,
    scale: float,
    block_bytes: int,
) -> torch.Tensor:
    """Output rows ``q_rows`` (None: all) of every sequence in ``x`` (B, L, D), as (B, rows, D), in float64.

    ``table`` describes the B rows of ``x`` (:class:`~mhabench.pattern.TokenTable`)."""
    head_dim = w.q_dim // heads
    kv_heads = w.kv_dim // head_dim
    # contiguous once, so no block of the loop in _attend copies them again
    k = _project(x, w.w_k, w.b_k, kv_heads).contiguous()
    v = _project(x, w.w_v, w.b_v, kv_heads).contiguous()
    queries = torch.arange(x.shape[1], device=x.device) if q_rows is None else q_rows
    q = _project(x if q_rows is None else x[:, q_rows], w.w_q, w.b_q, heads)
    merged = _attend(q, k, v, queries, pattern, table, scale, block_bytes).transpose(1, 2).flatten(2)
    return merged @ w.w_o if w.b_o is None else merged @ w.w_o + w.b_o


def reference_attention(
    weights: AttentionWeights,
    x: torch.Tensor,
    heads: int,
    pattern: AttentionPattern,
    scale: float | None = None,
    *,
    rows: RowSample | None = None,
    block_bytes: int = BLOCK_BYTES,
) -> torch.Tensor:
    """softmax(mod(Q Kᵀ · scale) + mask) V W_o in float64 on ``x``'s device, grouped K/V heads broadcast.

    ``pattern`` is the case's :class:`~mhabench.pattern.AttentionPattern`, whose documents describe the rows of
    ``x`` (a bool, the argument before patterns, still works and is deprecated). ``scale`` defaults to 1/√d_k
    (the ``unscaled`` ablation passes 1). Returns (b, n, D), or with ``rows`` only those (batch, row) pairs, as
    (k, D), each batch element projected on its own.
    """
    w = weights.to(dtype=torch.float64, device=x.device)
    scale = 1 / math.sqrt(w.q_dim // heads) if scale is None else scale
    pattern = as_pattern(pattern)
    table = TokenTable.of(pattern.rows(x.shape[0], x.shape[1]), x.device)
    if rows is None:
        return _rows_of(w, x.to(torch.float64), None, heads, pattern, table, scale, block_bytes)
    out = torch.empty(len(rows.row_index), w.d_model, dtype=torch.float64, device=x.device)
    for batch in rows.batch_index.unique().tolist():
        chosen = rows.batch_index == batch
        q_rows = rows.row_index[chosen].to(x.device)
        sequence = x[batch : batch + 1].to(torch.float64)
        one_row = TokenTable(table.segment[batch : batch + 1], table.position[batch : batch + 1])
        out[chosen.to(x.device)] = _rows_of(w, sequence, q_rows, heads, pattern, one_row, scale, block_bytes)[0]
    return out


def decode_reference(weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern) -> torch.Tensor:
    """Decode of the last token of ``x`` against a cache of the others: the last row of causal attention.

    The last token sees every cached token whatever the mask, except under a sliding window (the last
    ``window`` tokens); a score modifier applies. Only the last row is computed: O(n), not O(n²).
    """
    pattern = as_pattern(pattern)
    if pattern.mask != "sliding_window":
        pattern = dataclasses.replace(pattern, mask="causal", prefix=None)
    batch, seq_len, _ = x.shape
    last = RowSample(torch.arange(batch), torch.full((batch,), seq_len - 1))
    return reference_attention(weights, x, heads, pattern, rows=last).unsqueeze(1)


def expected_output(
    weights: AttentionWeights,
    x: torch.Tensor,
    heads: int,
    pattern: AttentionPattern,
    *,
    phase: str = "prefill",
    scale: float | None = None,
    sample_above: int = SAMPLE_ABOVE_SCORES,
) -> Reference:
    """The reference the runner checks standard attention against: every row, or a sample above the size."""
    if phase == "decode":
        return Reference(decode_reference(weights, x, heads, pattern))
    batch, seq_len, _ = x.shape
    if batch * heads * seq_len * seq_len <= sample_above:
        return Reference(reference_attention(weights, x, heads, pattern, scale))
    rows = sample_rows(batch, seq_len)
    return Reference(reference_attention(weights, x, heads, pattern, scale, rows=rows), rows)


def numerical_error(output: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """``(max_abs_err, max_rel_err)`` where the relative error is normalised by max |reference|."""
    diff = (output.detach().to(dtype=torch.float64, device=reference.device) - reference).abs().max().item()
    scale = reference.abs().max().item()
    return diff, diff / scale if scale else diff


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One output against its reference: the errors, NaN/Inf count, and the verdict with its reason."""

    max_abs_err: float
    max_rel_err: float
    bad_elements: int
    """NaN or Inf elements anywhere in the output (NaN compares false against any tolerance)."""
    ok: bool
    reason: str
    """Empty when ``ok``; otherwise one line for the row's ``error`` column."""


def check_output(output: torch.Tensor, reference: torch.Tensor | Reference, dtype: str) -> CheckResult:
    """Compare ``output`` with ``reference`` under ``dtype``'s tolerance; NaN or Inf always fails.

    Errors are taken over the finite elements, so a row with NaN still shows how far the rest is.
    """
    ref = reference if isinstance(reference, Reference) else Reference(reference)
    out = output.detach()
    bad = int((~torch.isfinite(out)).sum().item())
    compared = ref.compared(out).to(dtype=torch.float64, device=ref.values.device)
    if compared.shape != ref.values.shape:
        reason = f"output shape {tuple(compared.shape)} != reference shape {tuple(ref.values.shape)}"
        return CheckResult(math.nan, math.nan, bad, False, reason)
    diff = torch.where(torch.isfinite(compared), (compared - ref.values).abs(), 0.0)
    max_abs = diff.max().item() if diff.numel() else 0.0
    scale = ref.values.abs().max().item() if ref.values.numel() else 0.0
    max_rel = max_abs / scale if scale else max_abs
    checked = f" on {len(ref.rows.row_index)} sampled rows" if ref.rows is not None else ""
    reasons = [
        (not math.isfinite(scale), "the float64 reference itself is not finite"),
        (bad > 0, f"{bad} of {out.numel()} output elements are NaN or Inf"),
        (max_rel > TOLERANCE[dtype], f"max_rel_err {max_rel:.3g} > {TOLERANCE[dtype]:g} vs float64 reference{checked}"),
    ]
    reason = next((text for failed, text in reasons if failed), "")
    return CheckResult(max_abs, max_rel, bad, not reason, reason)


def reference_bytes(shape: Workload, block_bytes: int = BLOCK_BYTES, sample_above: int = SAMPLE_ABOVE_SCORES) -> int:
    """Predicted peak bytes the reference allocates on the case's device (the case's own tensors excluded).

    ``seq_len`` queries per sequence against ``kv_len`` keys (decode: 1 against n + 1, recognised by
    seq_len < kv_len). Counts the float64 weights and input, K and V (each possibly copied once by
    einsum), the queries with the attention output, its merge copy and W_o's result, and two score
    blocks alive at once (the scores and their softmax). Decode and sampled checks work one sequence
    at a time on at most ``SAMPLE_ROWS`` query rows. The queries and the heads' output are
    ``heads·head_dim`` wide, which is d_model unless the scenario sets ``head_dim`` apart.
    """
    d_model, q_dim, kv_dim = shape.d_model, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    weights = 2 * d_model * (q_dim + kv_dim) + 2 * (q_dim + kv_dim)
    scores_total = shape.batch * shape.heads * shape.seq_len * shape.kv_len
    decode = shape.seq_len < shape.kv_len
    by_sequence = decode or scores_total > sample_above
    sequences = 1 if by_sequence else shape.batch
    rows = min(shape.seq_len, SAMPLE_ROWS) if by_sequence else shape.seq_len
    gathered_rows = shape.batch if decode else min(SAMPLE_ROWS, shape.batch * shape.seq_len) if by_sequence else 0
    gathered = gathered_rows * d_model
    per_row = sequences * shape.heads * shape.kv_len
    block = max(block_bytes // FLOAT64_BYTES // per_row, 1) * per_row
    alibi = shape.pattern.score_mod == "alibi"
    scores = (3 if alibi else 2) * min(rows * per_row, block)  # ALiBi's bias block beside them
    inputs = sequences * shape.kv_len * d_model
    keys_values = 4 * sequences * shape.kv_len * kv_dim
    queries_out = sequences * rows * (4 * q_dim + d_model)
    return (weights + inputs + keys_values + queries_out + scores + gathered) * FLOAT64_BYTES
