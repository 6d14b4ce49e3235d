"""Attention patterns (issue 19): every mask and score modifier against float64 attention written out here.

The expected outputs below never call :mod:`mhabench.pattern`'s ``allowed``/``score_bias``: each token's
document and position, who may see whom, the soft-cap, the ALiBi slopes and the softmax are spelled out
per (query, key) pair in plain Python, so a wrong rule shared by the reference and the implementations
fails here. The same brute-force rule counts the pairs the cost model's closed forms must match.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mhabench import cost
from mhabench.analysis.case_label import case_label
from mhabench.cli import app
from mhabench.errors import ConfigError
from mhabench.impls import get_spec
from mhabench.impls.reference import check_output, decode_reference, reference_attention, sample_rows
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import AttentionPattern, alibi_slopes
from mhabench.results.columns import with_key_defaults
from mhabench.results.schema import CaseIdentity
from mhabench.run.inputs import make_inputs
from mhabench.run.steps import input_shape, prepare
from mhabench.scenario.cases import Case, expand_cases
from mhabench.scenario.loading import parse_config

CPU = torch.device("cpu")
D_MODEL, HEADS, SEQ_LEN = 32, 4, 12
AGREE = 1e-4
"""Largest relative error a float32 implementation may show against float64 on these tiny cases."""


# --- the independent float64 computation -----------------------------------------------------------


class Token(NamedTuple):
    """One token of an input row: the document it belongs to, its position there, and whether it is real."""

    document: int
    position: int
    real: bool


def token_rows(case: Case, tokens: int | None = None) -> list[list[Token]]:
    """Every input row's tokens, laid out from the case's fields (padding is a document of its own)."""
    if case.pattern.lengths is None:
        length = tokens or case.seq_len
        return [[Token(0, i, True) for i in range(length)] for _ in range(case.batch)]
    if case.pattern.layout == "packed":
        return [[Token(d, i, True) for d, size in enumerate(case.pattern.lengths) for i in range(size)]]
    return [
        [Token(0, i, True) if i < size else Token(1, i - size, False) for i in range(case.seq_len)]
        for size in case.pattern.lengths
    ]


def sees(mask: str, window: int, prefix: int, query: Token, key: Token) -> bool:
    """The mask rule of one (query, key) pair, written out: same document, then the mask's own condition."""
    if query.document != key.document:
        return False
    i, j = query.position, key.position
    if mask == "none":
        return True
    if mask == "sliding_window":
        return i - window < j <= i
    if mask == "prefix_lm":
        return j < prefix or j <= i
    return j <= i  # causal, document


def bloom_slopes(heads: int) -> list[float]:
    """ALiBi's head slopes as the paper and BLOOM define them: for a power of two h a geometric sequence
    starting (and with ratio) 2^(-8/h); otherwise the power of two below, then every other slope of twice it."""

    def power_of_two(count: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(count) - 3)))
        return [start * start**k for k in range(count)]

    if math.log2(heads).is_integer():
        return power_of_two(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_two(closest) + bloom_slopes(2 * closest)[0::2][: heads - closest]


def float64_weights(weights: AttentionWeights) -> dict[str, torch.Tensor | None]:
    return {name: None if t is None else t.to(torch.float64) for name, t in vars(weights).items()}


def project(x: torch.Tensor, w: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor:
    assert w is not None
    return x @ w if b is None else x @ w + b


def independent_attention(
    case: Case, weights: AttentionWeights, x: torch.Tensor, *, plain: bool = False, last_only: bool = False
) -> torch.Tensor:
    """softmax over the allowed keys of mod(q·k/√d) per (query, key) pair, then W_o, in float64.

    ``plain``: every key of the row, no modifier (to show a pattern changes the output). ``last_only``: the
    last query of each row only (a decode step), as (rows, 1, D).
    """
    w = float64_weights(weights)
    heads, kv_heads, head_dim = case.heads, case.kv_heads, case.head_dim
    group = heads // kv_heads
    slopes = bloom_slopes(heads)
    mask = "none" if plain else case.pattern.mask
    outputs = []
    for row_x, row in zip(x.to(torch.float64), token_rows(case, x.shape[1]), strict=True):
        q = project(row_x, w["w_q"], w["b_q"]).view(len(row), heads, head_dim)
        k = project(row_x, w["w_k"], w["b_k"]).view(len(row), kv_heads, head_dim)
        v = project(row_x, w["w_v"], w["b_v"]).view(len(row), kv_heads, head_dim)
        queries = [len(row) - 1] if last_only else range(len(row))
        merged = torch.zeros(len(queries), heads * head_dim, dtype=torch.float64)
        for out_index, a in enumerate(queries):
            for h in range(heads):
                logits = []
                for b, key in enumerate(row):
                    if not plain and not sees(mask, case.pattern.window, case.pattern.prefix, row[a], key):
                        logits.append(-math.inf)
                        continue
                    s = float(q[a, h] @ k[b, h // group]) / math.sqrt(head_dim)
                    if not plain and case.pattern.score_mod == "softcap":
                        s = case.pattern.softcap * math.tanh(s / case.pattern.softcap)
                    if not plain and case.pattern.score_mod == "alibi":
                        s -= slopes[h] * abs(row[a].position - key.position)
                    logits.append(s)
                top = max(logits)
                exps = torch.tensor([math.exp(value - top) for value in logits], dtype=torch.float64)
                merged[out_index, h * head_dim : (h + 1) * head_dim] = (exps / exps.sum()) @ v[:, h // group]
        outputs.append(project(merged, w["w_o"], w["b_o"]))
    return torch.stack(outputs)


def relative_error(output: torch.Tensor, expected: torch.Tensor) -> float:
    return float((output.to(torch.float64) - expected).abs().max() / expected.abs().max())


# --- cases ------------------------------------------------------------------------------------------


def cases_of(scenario: dict[str, Any], source: str = "patterns.yaml") -> list[Case]:
    base = {"name": "p", "seq_len": SEQ_LEN, "d_model": D_MODEL, "heads": HEADS}
    config = parse_config({"device": "cpu", "scenarios": [{**base, **scenario}]}, source)
    return expand_cases(config, CPU)


def one_case(**scenario: Any) -> Case:
    """The case of one scenario; a window over the whole sequence, which a config refuses, set on the case."""
    window = scenario.get("window", 0)
    if window >= scenario.get("seq_len", SEQ_LEN):
        (case,) = cases_of({"bias": True, **scenario, "window": 1})
        return dataclasses.replace(case, pattern=dataclasses.replace(case.pattern, window=window))
    (case,) = cases_of({"bias": True, **scenario})
    return case


PATTERNS: dict[str, dict[str, Any]] = {
    "none": {"batch": 2},
    "causal": {"causal": True, "batch": 2},
    "mask_causal": {"mask": "causal"},
    "window1": {"mask": "sliding_window", "window": 1},
    "window5": {"mask": "sliding_window", "window": 5, "batch": 2},
    "window_n": {"mask": "sliding_window", "window": SEQ_LEN},
    "window_above_n": {"mask": "sliding_window", "window": 40},
    "prefix_lm": {"mask": "prefix_lm", "prefix": 4},
    "document_padded": {"mask": "document", "lengths": [5, 12, 3]},
    "document_packed": {"mask": "document", "lengths": [5, 12, 3], "layout": "packed"},
    "bidirectional_padded": {"lengths": [7, 2]},
    "bidirectional_packed": {"mask": "none", "lengths": [7, 2, 4], "layout": "packed"},
    "window_packed": {"mask": "sliding_window", "window": 3, "lengths": [6, 5], "layout": "packed"},
    "prefix_packed_alibi": {
        "mask": "prefix_lm",
        "prefix": 3,
        "lengths": [6, 4],
        "layout": "packed",
        "score_mod": "alibi",
    },
    "softcap": {"mask": "causal", "score_mod": "softcap", "softcap": 0.5},
    "softcap_documents": {"mask": "document", "lengths": [8, 3], "score_mod": "softcap", "softcap": 1.5},
    "alibi": {"score_mod": "alibi", "batch": 2},
    "alibi_6_heads": {"mask": "causal", "score_mod": "alibi", "heads": 6, "d_model": 48},
    "gqa_window_alibi": {"mask": "sliding_window", "window": 4, "kv_heads": 2, "score_mod": "alibi"},
    "mqa_documents": {"mask": "document", "kv_heads": 1, "lengths": [4, 9]},
}
PLAIN_ONES = {"none"}


@pytest.fixture(scope="module")
def pattern_inputs() -> dict[str, tuple[Case, AttentionWeights, torch.Tensor, torch.Tensor]]:
    """Per pattern: the case, its weights and input, and the float64 output computed here."""
    prepared = {}
    for name, fields in PATTERNS.items():
        case = one_case(**fields)
        inputs = make_inputs(case, CPU)
        prepared[name] = (case, inputs.weights, inputs.x, independent_attention(case, inputs.weights, inputs.x))
    return prepared


@pytest.mark.parametrize("name", PATTERNS)
def test_reference_matches_the_independent_computation(name: str, pattern_inputs: dict[str, Any]) -> None:
    case, weights, x, expected = pattern_inputs[name]
    assert x.shape[:2] == input_shape(case)
    reference = reference_attention(weights, x, case.heads, case.pattern)
    assert reference.shape == expected.shape
    assert relative_error(reference, expected) < 1e-12
    if name not in PLAIN_ONES:  # the pattern changes the output: comparing against it can fail
        assert relative_error(independent_attention(case, weights, x, plain=True), expected) > 1e-2


IMPLEMENTATION_CASES = [
    (impl, name)
    for impl in ("naive", "per_head", "fused")
    for name in PATTERNS
    if not (impl == "fused" and PATTERNS[name].get("score_mod") == "softcap")  # SDPA has no score hook
]


@pytest.mark.parametrize(("impl", "name"), IMPLEMENTATION_CASES)
def test_implementations_match_the_reference(impl: str, name: str, pattern_inputs: dict[str, Any]) -> None:
    case, weights, x, expected = pattern_inputs[name]
    spec = get_spec(impl)
    reason = spec.capabilities.unsupported_reason(impl, case.workload(), device_type="cpu", dtype="float32")
    assert reason is None
    _, step = prepare(spec, case, weights, x)
    output = step.run()
    assert relative_error(output, expected) < AGREE
    verdict = check_output(output, reference_attention(weights, x, case.heads, case.pattern), case.dtype)
    assert verdict.ok, verdict.reason


FLEX_PATTERNS = ["window5", "softcap_documents", "prefix_packed_alibi"]
"""Three compiles (~5 s each on a CPU): a shared block mask over two rows, per-row masks, packed documents
with a score mod."""


@pytest.mark.parametrize("name", FLEX_PATTERNS)
def test_flex_matches_the_independent_computation(name: str, pattern_inputs: dict[str, Any]) -> None:
    case, weights, x, expected = pattern_inputs[name]
    _, step = prepare(get_spec("flex"), case, weights, x)
    assert relative_error(step.run(), expected) < AGREE


@pytest.mark.parametrize("name", ["document_padded", "prefix_packed_alibi", "gqa_window_alibi"])
def test_sampled_reference_rows_are_the_full_reference_rows(name: str, pattern_inputs: dict[str, Any]) -> None:
    """Large cases check sampled rows, each batch row projected on its own: its documents must stay its own."""
    case, weights, x, expected = pattern_inputs[name]
    rows = sample_rows(x.shape[0], x.shape[1], count=7, seed=3)
    sampled = reference_attention(weights, x, case.heads, case.pattern, rows=rows)
    assert relative_error(sampled, rows.take(expected)) < 1e-12


def test_a_wrong_mask_is_a_mismatch(pattern_inputs: dict[str, Any]) -> None:
    """The check the runner applies catches an implementation that ignores the window."""
    case, weights, x, _ = pattern_inputs["window5"]
    causal_only = one_case(mask="causal", batch=2)
    _, step = prepare(get_spec("naive"), causal_only, weights, x)
    verdict = check_output(step.run(), reference_attention(weights, x, case.heads, case.pattern), case.dtype)
    assert not verdict.ok and "max_rel_err" in verdict.reason


# --- ALiBi slopes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("heads", range(1, 33))
def test_alibi_slopes_follow_the_paper(heads: int) -> None:
    assert alibi_slopes(heads).tolist() == pytest.approx(bloom_slopes(heads), rel=1e-12)


def test_alibi_slopes_known_values() -> None:
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    # 6 heads: the 4-head slopes, then the 1st and 3rd of the 8-head ones
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


# --- decode with a window ---------------------------------------------------------------------------

DECODE_CASES = {
    "window3": {"mask": "sliding_window", "window": 3},
    "window1_alibi": {"mask": "sliding_window", "window": 1, "score_mod": "alibi"},
    "window4_alibi_gqa": {"mask": "sliding_window", "window": 4, "score_mod": "alibi", "kv_heads": 2},
    "window_above_cache": {"mask": "sliding_window", "window": 30},
    "causal": {"mask": "causal"},
}


@pytest.mark.parametrize("impl", ["naive", "per_head", "fused"])
@pytest.mark.parametrize("name", DECODE_CASES)
def test_decode_attends_to_the_last_window_keys(impl: str, name: str) -> None:
    case = one_case(phase="decode", batch=2, seq_len=10, **DECODE_CASES[name])
    inputs = make_inputs(case, CPU)
    assert inputs.x.shape[1] == case.seq_len + 1  # the cache and the new token
    expected = independent_attention(case, inputs.weights, inputs.x, last_only=True)
    assert relative_error(decode_reference(inputs.weights, inputs.x, case.heads, case.pattern), expected) < 1e-12
    _, step = prepare(get_spec(impl), case, inputs.weights, inputs.x)
    assert relative_error(step.run(), expected) < AGREE
    if (
        case.pattern.window and case.pattern.window <= case.seq_len
    ):  # the window matters: the full cache gives another answer
        unwindowed = {field: value for field, value in DECODE_CASES[name].items() if field != "window"}
        full = one_case(phase="decode", batch=2, seq_len=10, **{**unwindowed, "mask": "causal"})
        assert relative_error(independent_attention(full, inputs.weights, inputs.x, last_only=True), expected) > 1e-3


@pytest.mark.parametrize(("window", "seq_len"), [(1, 10), (3, 10), (10, 10), (11, 10), (30, 10), (256, 4096)])
def test_decode_cost_counts_the_window_keys(window: int, seq_len: int) -> None:
    case = one_case(phase="decode", mask="sliding_window", window=window, seq_len=seq_len)
    shape = case.workload()
    assert (shape.seq_len, shape.kv_len) == (1, min(window, seq_len + 1))
    assert shape.visible_fraction == 1.0
    assert cost.MATERIALIZED(shape).attn_flops == 4 * case.heads * shape.kv_len * case.head_dim


# --- FLOPs against brute-force pair counts ----------------------------------------------------------


def brute_visible_pairs(mask: str, window: int, prefix: int, n: int) -> int:
    tokens = [Token(0, i, True) for i in range(n)]
    return sum(sees(mask, window, prefix, query, key) for query in tokens for key in tokens)


@settings(max_examples=300, deadline=None)
@given(
    mask=st.sampled_from(["none", "causal", "document", "sliding_window", "prefix_lm"]),
    n=st.integers(1, 48),
    window=st.integers(1, 60),
    prefix=st.integers(1, 60),
)
def test_visible_pairs_closed_forms_match_brute_force(mask: str, n: int, window: int, prefix: int) -> None:
    pattern = AttentionPattern(
        mask=mask,  # type: ignore[arg-type]
        window=window if mask == "sliding_window" else None,
        prefix=prefix if mask == "prefix_lm" else None,
    )
    assert pattern.visible_pairs(n) == brute_visible_pairs(mask, window, prefix, n)


class PairCounts(NamedTuple):
    computed: int
    visible: int
    useful: int
    padding: int
    tokens: int
    real_tokens: int


def brute_pair_counts(case: Case) -> PairCounts:
    """Every (query, key) pair of every input row, classified one by one."""
    computed = visible = useful = padding = tokens = real_tokens = 0
    for row in token_rows(case):
        tokens += len(row)
        real_tokens += sum(token.real for token in row)
        for query in row:
            for key in row:
                allowed = sees(case.pattern.mask, case.pattern.window, case.pattern.prefix, query, key)
                computed += 1
                visible += allowed
                useful += allowed and query.real and key.real
                padding += not (query.real and key.real)
    return PairCounts(computed, visible, useful, padding, tokens, real_tokens)


FRACTION_CASES = {
    "causal": {"mask": "causal", "batch": 3},
    "window": {"mask": "sliding_window", "window": 4, "batch": 2},
    "prefix": {"mask": "prefix_lm", "prefix": 5},
    "document_padded": {"mask": "document", "lengths": [5, 12, 3, 1]},
    "document_packed": {"mask": "document", "lengths": [5, 12, 3, 1], "layout": "packed"},
    "bidirectional_padded": {"mask": "none", "lengths": [2, 11]},
    "bidirectional_packed": {"lengths": [2, 11], "layout": "packed"},
    "window_padded": {"mask": "sliding_window", "window": 3, "lengths": [4, 12, 7]},
    "prefix_packed": {"mask": "prefix_lm", "prefix": 2, "lengths": [4, 12, 7], "layout": "packed"},
}


@pytest.mark.parametrize("name", FRACTION_CASES)
def test_workload_fractions_match_brute_force(name: str) -> None:
    case = one_case(**FRACTION_CASES[name])
    shape = case.workload()
    counts = brute_pair_counts(case)
    assert shape.computed_pairs == counts.computed
    assert shape.tokens == counts.tokens
    assert shape.visible_fraction == pytest.approx(counts.visible / counts.computed, rel=1e-12)
    assert shape.useful_pair_fraction == pytest.approx(counts.useful / counts.computed, rel=1e-12)
    assert shape.padding_pair_fraction == pytest.approx(counts.padding / counts.computed, rel=1e-12)
    assert shape.real_token_fraction == pytest.approx(counts.real_tokens / counts.tokens, rel=1e-12)
    modelled = cost.MATERIALIZED(shape)
    real = counts.real_tokens / counts.tokens
    assert modelled.useful_flops == round(
        modelled.proj_flops * real + modelled.attn_flops * counts.useful / counts.computed
    )
    padded = case.pattern.lengths is not None and case.pattern.layout == "padded"
    assert (modelled.padding_share > 0) == padded
    share = (modelled.proj_flops * (1 - real) + modelled.attn_flops * counts.padding / counts.computed) / (
        modelled.flops
    )
    assert modelled.padding_share == pytest.approx(share, rel=1e-12)


def test_packing_costs_no_padding_and_padding_does() -> None:
    lengths = [3, 16, 5, 9]
    padded = cost.FUSED(one_case(mask="document", lengths=lengths, seq_len=16).workload())
    packed = cost.FUSED(one_case(mask="document", lengths=lengths, layout="packed", seq_len=16).workload())
    assert packed.padding_share == 0 and padded.padding_share > 0.3
    assert padded.useful_flops < padded.flops
    # the same documents, the same useful projections; packing's block-diagonal pairs are all visible work
    assert packed.proj_flops == round(padded.proj_flops * sum(lengths) / (len(lengths) * 16))


def test_useful_flops_are_about_half_under_a_causal_mask() -> None:
    n = 1024
    modelled = cost.FUSED(one_case(mask="causal", seq_len=n).workload())
    attention_share = (modelled.useful_flops - modelled.proj_flops) / modelled.attn_flops
    assert attention_share == pytest.approx((n + 1) / (2 * n), rel=1e-9)
    assert attention_share == pytest.approx(0.5, abs=1e-3)
    plain = cost.FUSED(one_case(seq_len=n).workload())
    assert plain.useful_flops == plain.flops


def test_a_window_keeps_about_n_times_w_pairs() -> None:
    n, w = 4096, 256
    shape = one_case(mask="sliding_window", window=w, seq_len=n).workload()
    assert shape.visible_fraction * n * n == w * (w + 1) // 2 + (n - w) * w
    assert shape.visible_fraction == pytest.approx(w / n, rel=0.05)


def test_a_dense_mask_is_in_the_bytes_of_the_layouts_that_read_one() -> None:
    """A window is an n×L boolean tensor that naive reads, that SDPA turns into an additive float mask each call
    (reads 1 byte, writes and reads back 4 per pair in float32: what its dispatched ops showed), and nothing for
    flex's block mask."""
    n = 64
    window, causal = (
        one_case(mask="sliding_window", window=8, seq_len=n).workload(),
        one_case(mask="causal", seq_len=n).workload(),
    )
    assert cost.MATERIALIZED(window).attn_bytes - cost.MATERIALIZED(causal).attn_bytes == n * n
    assert cost.FUSED_DENSE_MASK(window).attn_bytes - cost.FUSED_DENSE_MASK(causal).attn_bytes == n * n * (1 + 2 * 4)
    assert cost.FUSED(window).attn_bytes == cost.FUSED(causal).attn_bytes


# --- configs: one-line errors -----------------------------------------------------------------------

BAD_FIELDS = [
    ({"mask": "sliding_window", "window": 0}, "scenarios[0].window", "greater than 0"),
    ({"window": 4}, "scenarios[0].window", "window applies only to mask sliding_window"),
    ({"mask": "sliding_window"}, "scenarios[0].window", "mask sliding_window needs window"),
    ({"prefix": 2}, "scenarios[0].prefix", "prefix applies only to mask prefix_lm"),
    ({"mask": "prefix_lm"}, "scenarios[0].prefix", "needs prefix"),
    ({"mask": "document"}, "scenarios[0].lengths", "mask document needs lengths"),
    ({"causal": True, "mask": "sliding_window", "window": 2}, "scenarios[0]", "give mask or causal"),
    ({"lengths": [3, 13]}, "scenarios[0].lengths", "13 tokens is longer than seq_len 12"),
    ({"lengths": []}, "scenarios[0].lengths", "empty length list"),
    ({"lengths": [0, 3]}, "scenarios[0].lengths", "document length 0 is not an integer from 1"),
    ({"mask": "causal", "lengths": [3]}, "scenarios[0].lengths", "mask: document"),
    ({"layout": "packed"}, "scenarios[0].layout", "layout packed needs lengths"),
    ({"softcap": 5.0}, "scenarios[0].softcap", "softcap applies only to score_mod softcap"),
    ({"score_mod": "softcap"}, "scenarios[0].softcap", "needs softcap"),
    ({"score_mod": "softcap", "softcap": 0}, "scenarios[0].softcap", "greater than 0"),
    ({"batch": 2, "lengths": [3]}, "scenarios[0].lengths", "leave batch out"),
    ({"lengths": [3], "phase": "decode"}, "scenarios[0].lengths", "lengths need prefill"),
    ({"lengths": {"distribution": "uniform", "min": 13, "count": 4}}, "scenarios[0].lengths", "min 13"),
    ({"lengths": {"distribution": "uniform", "min": 4, "max": 3, "count": 4}}, "scenarios[0].lengths", "max 3"),
    ({"mask": "diagonal"}, "scenarios[0].mask", "diagonal"),
    ({"score_mod": "rope"}, "scenarios[0].score_mod", "rope"),
]


@pytest.mark.parametrize(("fields", "where", "what"), BAD_FIELDS)
def test_bad_pattern_fields_are_one_line_errors(fields: dict[str, Any], where: str, what: str) -> None:
    with pytest.raises(ConfigError) as raised:
        cases_of(fields)
    message = str(raised.value)
    assert "\n" not in message
    assert f"patterns.yaml: {where}" in message and what in message


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (None, "cannot read the lengths file"),
        ("12\nmany\n", "line 2 is not a positive length"),
        ("# none\n", "no lengths"),
    ],
)
def test_a_bad_lengths_file_is_one_line(tmp_path: Path, content: str | None, what: str) -> None:
    if content is not None:
        (tmp_path / "x.txt").write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        cases_of({"lengths": {"file": "x.txt", "count": 4}}, source=str(tmp_path / "masks.yaml"))
    message = str(raised.value)
    assert "\n" not in message and "lengths" in message and what in message
    assert str(tmp_path / "x.txt") in message  # relative to the config file's folder


def test_a_bad_window_through_the_cli_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "masks.yaml"
    config.write_text(
        "device: cpu\nscenarios:\n  - {seq_len: 8, d_model: 16, heads: 2, mask: sliding_window, window: 0}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "scenarios[0].window" in result.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


# --- sweeps -----------------------------------------------------------------------------------------


def test_a_window_swept_beside_causal_does_not_repeat_causal() -> None:
    cases = cases_of({"mask": ["causal", "sliding_window"], "window": [2, 4, 8], "seq_len": [8, 16]})
    assert [(c.seq_len, c.pattern.mask, c.pattern.window) for c in cases] == [
        (8, "causal", None),
        (8, "sliding_window", 2),
        (8, "sliding_window", 4),  # window 8 covers n = 8: that point is the causal case, run once
        (16, "causal", None),
        (16, "sliding_window", 2),
        (16, "sliding_window", 4),
        (16, "sliding_window", 8),
    ]
    assert len({c.case_id for c in cases}) == len(cases)
    assert all(c.causal for c in cases)


def test_pattern_sweeps_give_distinct_case_ids() -> None:
    cases = cases_of(
        {
            "mask": ["none", "document", "prefix_lm"],
            "prefix": [2, 3],
            "lengths": [[3, 12], [5, 5, 5]],
            "layout": ["padded", "packed"],
            "score_mod": ["none", "softcap", "alibi"],
            "softcap": [1.0, 30.0],
        }
    )
    # mask × prefix (prefix_lm only) × lengths × layout × (none, softcap × 2, alibi)
    assert len(cases) == (1 + 1 + 2) * 2 * 2 * 4
    assert len({c.case_id for c in cases}) == len(cases)
    packed = next(c for c in cases if c.pattern.layout == "packed" and c.lengths == "3.12")
    assert packed.batch == 2 and input_shape(packed) == (1, 15)


def test_uniform_lengths_resolve_per_seq_len_within_the_cap() -> None:
    spec = {"distribution": "uniform", "min": 3, "count": 20, "seed": 7}
    cases = cases_of({"mask": "document", "lengths": spec, "seq_len": [4, 8, 32]})
    assert [c.seq_len for c in cases] == [4, 8, 32]
    for case in cases:
        assert case.batch == 20 and case.pattern.lengths is not None and len(case.pattern.lengths) == 20
        assert all(3 <= length <= case.seq_len for length in case.pattern.lengths)
    assert max(cases[-1].pattern.lengths or ()) > 8  # the cap moves with seq_len
    again = cases_of({"mask": "document", "lengths": spec, "seq_len": [4, 8, 32]})
    assert [c.pattern.lengths for c in again] == [c.pattern.lengths for c in cases]
    reseeded = cases_of({"mask": "document", "lengths": {**spec, "seed": 8}, "seq_len": [32]})
    assert reseeded[0].pattern.lengths != cases[-1].pattern.lengths
    capped = cases_of({"mask": "document", "lengths": {**spec, "max": 5}, "seq_len": [32]})
    assert all(3 <= length <= 5 for length in capped[0].pattern.lengths or ())


def test_corpus_lengths_are_read_beside_the_config_and_cut_to_seq_len(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text("# tokens per document\n40\n\n3\n11 # a comment\n", encoding="utf-8")
    spec = {"file": "corpus.txt", "count": 30, "seed": 1}
    cases = cases_of({"mask": "document", "lengths": spec, "seq_len": [8, 64]}, source=str(tmp_path / "masks.yaml"))
    short, long = cases
    assert short.pattern.lengths is not None and long.pattern.lengths is not None
    assert set(short.pattern.lengths) == {3, 8}  # 40 and 11 are cut to seq_len 8
    assert set(long.pattern.lengths) == {3, 11, 40}
    assert [min(length, 8) for length in long.pattern.lengths] == list(short.pattern.lengths)  # the same draw
    assert re.fullmatch(r"corpus-[0-9a-f]{8}x30s1", short.lengths) and f"-len{short.lengths}-padded" in short.case_id


# --- old runs ---------------------------------------------------------------------------------------


def test_old_runs_read_their_mask_from_causal() -> None:
    frame = with_key_defaults(pd.DataFrame({"causal": [True, False, "True", "false"], "d_model": 8, "heads": 2}))
    assert list(frame["mask"]) == ["causal", "none", "causal", "none"]
    assert list(frame["window"]) == [0] * 4 and list(frame["prefix"]) == [0] * 4
    assert list(frame["lengths"]) == ["none"] * 4 and list(frame["layout"]) == ["none"] * 4
    assert list(frame["score_mod"]) == ["none"] * 4 and list(frame["softcap"]) == [0.0] * 4
    kept = with_key_defaults(pd.DataFrame({"causal": [True], "mask": ["sliding_window"], "window": [4]}))
    assert list(kept["mask"]) == ["sliding_window"] and list(kept["window"]) == [4]


def test_different_document_sets_never_share_a_case() -> None:
    """Long lists are labelled by a digest of their lengths: two sets with the same count, extremes and sum
    stay two cases (a shared label would silently drop one from the sweep)."""
    spec = {
        "name": "s",
        "seq_len": 16,
        "d_model": 32,
        "heads": 4,
        "mask": "document",
        "lengths": [[1, 5, 5, 9, 1, 1, 1], [1, 4, 6, 9, 1, 1, 1]],
    }
    cases = expand_cases(parse_config({"scenarios": [spec]}, "x.yaml"), torch.device("cpu"))
    assert [case.pattern.lengths for case in cases] == [(1, 5, 5, 9, 1, 1, 1), (1, 4, 6, 9, 1, 1, 1)]
    assert len({case.case_id for case in cases}) == 2


# --- issue 29: the label of a pattern's case -------------------------------------------------------


def test_a_packed_batch_is_labelled_one_row_and_an_implied_causal_is_not_repeated() -> None:
    """Issue 29: a packed batch of 4 documents read ``b=4`` though it is one row; ``causal window=…`` doubled."""
    (packed,) = cases_of({"mask": "document", "lengths": [8, 8, 8, 8], "layout": "packed", "seq_len": 8})
    row = with_key_defaults(
        pd.DataFrame([dataclasses.asdict(CaseIdentity.of(packed, impl="naive", device="cpu"))])
    ).iloc[0]
    assert case_label(row).startswith(f"n=8 h={HEADS} d={D_MODEL} b=1 float32 ") and row["batch"] == 4
    assert " causal" not in case_label(row) and "docs=8.8.8.8 packed" in case_label(row)
    (window,) = cases_of({"mask": "sliding_window", "window": 4})
    assert case_label(dataclasses.asdict(CaseIdentity.of(window, impl="naive"))).endswith("float32 window=4")


# --- issue 27: one attention shape -------------------------------------------------------------------


def test_a_cases_identity_stores_its_pattern_as_the_columns_older_runs_hold() -> None:
    """``CaseIdentity.of`` is the one case → key columns conversion: a size its mask does not use is 0, documents'
    layout is ``none`` without documents, and the case_id and shape come from the case itself."""
    (window,) = cases_of({"mask": "sliding_window", "window": 4, "score_mod": "softcap", "softcap": 30.0})
    (packed,) = cases_of({"mask": "document", "lengths": [3, 5], "layout": "packed", "seq_len": 8})
    (plain,) = cases_of({"causal": True})
    columns = ("mask", "window", "prefix", "lengths", "layout", "score_mod", "softcap", "causal")
    identity = {case: CaseIdentity.of(case, impl="naive", repeat=2) for case in (window, packed, plain)}
    assert [getattr(identity[window], name) for name in columns] == [
        "sliding_window",
        4,
        0,
        "none",
        "none",
        "softcap",
        30.0,
        True,
    ]
    assert [getattr(identity[packed], name) for name in columns] == [
        "document",
        0,
        0,
        "3.5",
        "packed",
        "none",
        0.0,
        True,
    ]
    assert [getattr(identity[plain], name) for name in columns] == ["causal", 0, 0, "none", "none", "none", 0.0, True]
    for case, row in identity.items():
        assert (row.case_id, row.batch, row.kv_heads, row.head_dim, row.repeat) == (
            case.case_id,
            case.batch,
            case.kv_heads,
            case.head_dim,
            2,
        )
