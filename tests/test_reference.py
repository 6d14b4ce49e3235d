"""The float64 reference: blocked = unblocked, sampled rows = the same rows of the full reference,
decode = the last causal row, NaN/Inf always fail the check, and the memory it predicts for itself."""

from __future__ import annotations

import math

import pytest
import torch

from mhabench.cost import Workload
from mhabench.impls.reference import (
    FLOAT64_BYTES,
    Reference,
    RowSample,
    check_output,
    decode_reference,
    expected_output,
    numerical_error,
    reference_attention,
    reference_bytes,
    sample_rows,
)
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.memory import LiveStorageTracker
from mhabench.pattern import CAUSAL, PLAIN


def textbook(weights: AttentionWeights, x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    """One head at a time, K/V heads repeated, the whole n×n matrix: independent of the blocked code."""
    w = weights.to(dtype=torch.float64)
    x = x.double()
    head_dim = w.d_model // heads
    groups = heads // (w.kv_dim // head_dim)
    q, k, v = (x @ m + (b if b is not None else 0) for m, b in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v)))
    outs = []
    for h in range(heads):
        kv = slice((h // groups) * head_dim, (h // groups + 1) * head_dim)
        scores = q[..., h * head_dim : (h + 1) * head_dim] @ k[..., kv].transpose(1, 2) / math.sqrt(head_dim)
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), -math.inf)
        outs.append(scores.softmax(-1) @ v[..., kv])
    merged = torch.cat(outs, dim=-1)
    return merged @ w.w_o + (w.b_o if w.b_o is not None else 0)


SHAPES = [(2, 9, 16, 2, 2, True, True), (3, 33, 64, 8, 2, True, False), (1, 17, 32, 4, 1, False, True)]


def case(
    batch: int, n: int, d_model: int, heads: int, kv_heads: int, bias: bool
) -> tuple[AttentionWeights, torch.Tensor]:
    weights = AttentionWeights.random(d_model, bias=bias, seed=1, kv_dim=kv_heads * (d_model // heads))
    return weights, torch.randn(batch, n, d_model, generator=torch.Generator().manual_seed(2))


@pytest.mark.parametrize(("batch", "n", "d_model", "heads", "kv_heads", "causal", "bias"), SHAPES)
@pytest.mark.parametrize("block_rows", [1, 4, 10_000])
def test_blocks_of_query_rows_give_the_textbook_result(
    batch: int, n: int, d_model: int, heads: int, kv_heads: int, causal: bool, bias: bool, block_rows: int
) -> None:
    weights, x = case(batch, n, d_model, heads, kv_heads, bias)
    block_bytes = block_rows * batch * heads * n * FLOAT64_BYTES
    out = reference_attention(weights, x, heads, CAUSAL if causal else PLAIN, block_bytes=block_bytes)
    torch.testing.assert_close(out, textbook(weights, x, heads, causal), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("batch", "n", "d_model", "heads", "kv_heads", "causal", "bias"), SHAPES)
def test_sampled_rows_are_those_rows_of_the_full_reference(
    batch: int, n: int, d_model: int, heads: int, kv_heads: int, causal: bool, bias: bool
) -> None:
    weights, x = case(batch, n, d_model, heads, kv_heads, bias)
    rows = sample_rows(batch, n, count=7)
    sampled = reference_attention(weights, x, heads, CAUSAL if causal else PLAIN, rows=rows)
    torch.testing.assert_close(sampled, rows.take(textbook(weights, x, heads, causal)), rtol=1e-12, atol=1e-12)


def test_sample_is_deterministic_distinct_and_covers_both_ends() -> None:
    first, second = sample_rows(4, 1000, count=50), sample_rows(4, 1000, count=50)
    assert torch.equal(first.batch_index, second.batch_index) and torch.equal(first.row_index, second.row_index)
    pairs = set(zip(first.batch_index.tolist(), first.row_index.tolist(), strict=True))
    assert len(pairs) == len(first.row_index) >= 48 and {(0, 0), (3, 999)} <= pairs
    assert len(sample_rows(1, 3, count=50).row_index) == 3


def test_rows_in_any_order_land_in_that_order() -> None:
    weights, x = case(2, 9, 16, 2, 2, True)
    rows = RowSample(torch.tensor([1, 0, 1]), torch.tensor([8, 3, 0]))
    full = textbook(weights, x, 2, True)
    torch.testing.assert_close(reference_attention(weights, x, 2, CAUSAL, rows=rows), full[[1, 0, 1], [8, 3, 0]])


def test_scale_is_passed_through() -> None:
    weights, x = case(1, 5, 8, 2, 2, False)
    assert not torch.allclose(
        reference_attention(weights, x, 2, PLAIN, scale=1.0), reference_attention(weights, x, 2, PLAIN)
    )


def test_decode_is_the_last_causal_row() -> None:
    weights, x = case(3, 12, 32, 4, 2, True)
    torch.testing.assert_close(decode_reference(weights, x, 4, PLAIN), textbook(weights, x, 4, True)[:, -1:])


def test_expected_output_samples_above_the_size_only() -> None:
    weights, x = case(2, 16, 16, 2, 2, False)
    assert expected_output(weights, x, 2, CAUSAL).rows is None
    sampled = expected_output(weights, x, 2, CAUSAL, sample_above=2 * 2 * 16 * 16 - 1)
    assert sampled.rows is not None and sampled.values.shape == (len(sampled.rows.row_index), 16)
    assert expected_output(weights, x, 2, CAUSAL, phase="decode").values.shape == (2, 1, 16)


def test_check_passes_within_tolerance_and_fails_beyond() -> None:
    weights, x = case(2, 9, 16, 2, 2, True)
    reference = reference_attention(weights, x, 2, CAUSAL)
    close = check_output(reference.float(), reference, "float32")
    assert close.ok and close.reason == "" and close.bad_elements == 0 and close.max_rel_err < 1e-6
    far = check_output(reference.float() * 1.01, reference, "float32")
    assert not far.ok and far.reason.startswith("max_rel_err ") and "> 0.001 vs float64 reference" in far.reason


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_or_inf_always_fails_with_the_count(bad: float) -> None:
    weights, x = case(2, 9, 16, 2, 2, True)
    reference = reference_attention(weights, x, 2, CAUSAL)
    output = reference.float().clone()
    output[0, 0, :3] = bad
    result = check_output(output, reference, "bfloat16")
    assert not result.ok and result.bad_elements == 3
    assert result.reason == f"3 of {output.numel()} output elements are NaN or Inf"
    assert math.isfinite(result.max_abs_err) and result.max_abs_err < 1e-6  # the finite rest is still measured


def test_nan_outside_the_sampled_rows_still_fails() -> None:
    weights, x = case(2, 9, 16, 2, 2, True)
    rows = RowSample(torch.tensor([0]), torch.tensor([0]))
    output = textbook(weights, x, 2, True).float()
    output[1, 5, 0] = math.nan
    result = check_output(output, Reference(reference_attention(weights, x, 2, CAUSAL, rows=rows), rows), "float32")
    assert not result.ok and result.bad_elements == 1


def test_wrong_shape_is_a_failed_check_not_a_crash() -> None:
    result = check_output(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64), "float32")
    assert not result.ok and result.reason == "output shape (2, 3) != reference shape (3, 2)"


def test_numerical_error_is_absolute_and_relative() -> None:
    assert numerical_error(torch.tensor([[2.5, -4.0]]), torch.tensor([[2.0, -4.0]], dtype=torch.float64)) == (
        0.5,
        0.125,
    )


def measured_bytes(weights: AttentionWeights, x: torch.Tensor, heads: int, **options: object) -> int:
    tracker = LiveStorageTracker()
    with tracker:
        expected_output(weights, x, heads, CAUSAL, **options)
    return tracker.peak_bytes


@pytest.mark.parametrize(
    ("batch", "n", "d_model", "heads", "kv_heads", "decode", "sample_above"),
    [
        (2, 256, 64, 4, 4, False, 2**40),
        (2, 256, 64, 4, 1, False, 2**40),
        (3, 300, 64, 8, 2, False, 1000),
        (4, 129, 64, 4, 4, True, 2**40),
    ],
)
def test_predicted_memory_bounds_the_real_peak(
    batch: int, n: int, d_model: int, heads: int, kv_heads: int, decode: bool, sample_above: int
) -> None:
    weights, x = case(batch, n, d_model, heads, kv_heads, False)
    phase = "decode" if decode else "prefill"
    shape = Workload(batch, 1 if decode else n, n, d_model, heads, kv_heads, d_model // heads, 8, CAUSAL)
    predicted = reference_bytes(shape, sample_above=sample_above)
    measured = measured_bytes(weights, x, heads, phase=phase, sample_above=sample_above)
    assert 0.5 * predicted <= measured <= predicted


def test_blocks_bound_the_scores() -> None:
    """One block of scores at a time: the peak grows with the block, not with n²."""
    weights, x = case(1, 512, 32, 4, 4, False)
    small_block = measured_bytes(weights, x, 4)  # default block holds all 512 rows here
    tracker = LiveStorageTracker()
    with tracker:
        reference_attention(weights, x, 4, CAUSAL, block_bytes=16 * 4 * 512 * FLOAT64_BYTES)
    assert tracker.peak_bytes < small_block / 4


@pytest.mark.cuda
def test_reference_runs_on_the_inputs_device_and_matches_the_cpu() -> None:
    weights, x = case(2, 64, 64, 4, 2, True)
    on_gpu = reference_attention(weights.to(device="cuda"), x.cuda(), 4, CAUSAL, block_bytes=2**16)
    assert on_gpu.device.type == "cuda"
    torch.testing.assert_close(on_gpu.cpu(), textbook(weights, x, 4, True), rtol=1e-10, atol=1e-10)
