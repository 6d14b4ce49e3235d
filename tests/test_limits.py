"""Bounds a scenario must stay within before anything runs: rows in a sweep, values in a YAML document."""

from __future__ import annotations

import time

import pytest
import torch
import yaml

from mhabench.errors import ConfigError, InputError
from mhabench.scenario import cases, limits
from mhabench.scenario.cases import count_cases, expand_cases
from mhabench.scenario.loading import parse_config

CPU = torch.device("cpu")
BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)


def test_row_limit_says_the_count_and_the_flag() -> None:
    with pytest.raises(ConfigError) as caught:
        limits.check_row_count(179_200, 4, 10_000)
    message = str(caught.value)
    assert isinstance(caught.value, InputError) and "\n" not in message
    assert "179,200 cases × 4 implementations = 716,800 rows" in message
    assert "--max-rows 716800" in message
    limits.check_row_count(2_500, 4, 10_000)  # exactly at the limit: allowed


def test_alias_bomb_is_refused_fast_with_a_short_message() -> None:
    data = yaml.safe_load(BILLION_LAUGHS)
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^x\.yaml: the document expands to more than 100,000 values") as caught:
        limits.check_document_size(data, "x.yaml")
    assert time.perf_counter() - start < 1.0
    assert len(str(caught.value)) < 200


def test_shared_values_are_counted_as_if_copied_out() -> None:
    inner = list(range(10))  # 11 values with its list
    data = {"k": [inner] * 10}  # dict 1 + key 1 + list 1 + 10 × 11
    limits.check_document_size(data, "x.yaml", limit=113)
    with pytest.raises(ConfigError, match="more than 112 values"):
        limits.check_document_size(data, "x.yaml", limit=112)


def test_self_referencing_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match="refers to the value that contains it"):
        limits.check_document_size(yaml.safe_load("a: &a [1, *a]\n"), "x.yaml")


def test_deep_nesting_does_not_overflow_the_stack() -> None:
    """50,000 nested lists: a recursive walk would raise RecursionError; the iterative one counts every level."""
    data: list[object] = []
    for _ in range(50_000):
        data = [data]
    assert limits.check_document_size(data, "x.yaml") is None  # 50,001 values: under the default limit
    assert limits.check_document_size(data, "x.yaml", limit=50_001) is None  # exactly at the limit: allowed
    with pytest.raises(ConfigError, match="more than 50,000 values"):  # the innermost level was counted too
        limits.check_document_size(data, "x.yaml", limit=50_000)


def test_case_count_matches_expansion_and_needs_no_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"seq_len": [8, 16, 32], "d_model": 16, "heads": [1, 2], "causal": [False, True]}
    config = parse_config({"scenarios": [spec, {**spec, "seq_len": 8, "heads": 2, "causal": False}]}, "x.yaml")
    config = config.model_copy(update={"dtype": ["float32", "bfloat16"]})
    assert count_cases(config, CPU) == len(expand_cases(config, CPU)) == 2 * (3 * 2 * 2 + 1)
    sizes = list(range(1, 401))
    huge = parse_config({"scenarios": [{**spec, "seq_len": sizes, "batch": sizes, "bias": [True, False]}]}, "x.yaml")
    monkeypatch.setattr(cases, "Case", None)  # building a single case now fails
    assert count_cases(huge, CPU) == 400 * 400 * 2 * 2 * 2  # 1.28 million cases, never built
