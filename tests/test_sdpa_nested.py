"""``sdpa_nested``: documents as nested jagged sequences into SDPA (issue 19's varlen route for SDPA).

Its bidirectional documents must match the float64 reference through the runner, what torch's nested SDPA
cannot run must be an ``unsupported`` row in torch's words (causal documents in torch 2.13), and the dispatch
trackers must measure a call that handles nested tensors instead of failing it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
import torch
from conftest import FIXED_PEAKS, TINY_TIMING

from mhabench.impls import build
from mhabench.impls.reference import reference_attention
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.memory import sdpa_backend
from mhabench.measure.trackers import DispatchTracker
from mhabench.pattern import AttentionPattern
from mhabench.run import runner
from mhabench.scenario.loading import parse_config


@pytest.fixture(scope="module")
def nested_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """(case_id, implementation) → row of one tiny run over padded and packed documents, and a GQA case."""
    documents = {"seq_len": 16, "d_model": 32, "heads": 4, "lengths": [[5, 16, 9]], "layout": ["padded", "packed"]}
    config = parse_config(
        {
            "name": "nested",
            "device": "cpu",
            "threads": 1,
            "timing": dict(TINY_TIMING),
            "implementations": ["naive", "sdpa_nested"],
            "scenarios": [
                {"name": "bidirectional", **documents},
                {"name": "causal", "mask": "document", **documents},
                {"name": "gqa", "seq_len": 8, "d_model": 32, "heads": 4, "kv_heads": 2},
            ],
        },
        "nested.yaml",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
        result = runner.run(config, tmp_path_factory.mktemp("runs"))
    return {(row["scenario"], row["layout"], row["impl"]): row for row in result.frame.to_dict(orient="records")}


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_bidirectional_documents_run_and_match_the_reference(nested_rows: Any, layout: str) -> None:
    row = nested_rows["bidirectional", layout, "sdpa_nested"]
    assert row["status"] == "ok", row["error"]
    assert row["max_rel_err"] < 1e-5
    assert row["sdpa_backend"]  # which SDPA backend ran on the nested sequences is recorded
    assert row["skips_masked_work"]  # no pair across documents is computed


def test_what_torch_cannot_run_is_unsupported_in_its_words(nested_rows: Any) -> None:
    causal = nested_rows["causal", "packed", "sdpa_nested"]
    gqa = nested_rows["gqa", "none", "sdpa_nested"]
    assert causal["status"] == "unsupported" and "is_causal on nested queries" in causal["error"]
    assert gqa["status"] == "unsupported" and "no grouped K/V heads" in gqa["error"]


def test_nested_ops_make_the_counts_a_lower_bound_not_a_failure() -> None:
    """The trackers see nested tensors with symbolic sizes: those ops are opaque (no formula can count them),
    so the counted columns are a lower bound and the model comparison is left empty."""
    weights = AttentionWeights.random(32, seed=3)
    pattern = AttentionPattern(lengths=(5, 11), layout="packed")
    module = build("sdpa_nested", weights, 4, pattern)
    x = torch.randn(1, 16, 32)
    with torch.no_grad(), DispatchTracker() as tracker:
        out = module(x)
    assert any(name.startswith("nested") for name in tracker.counts().opaque_ops)
    assert tracker.result().allocations_per_call > 0
    expected = reference_attention(weights, x, 4, pattern)
    assert torch.allclose(out.double(), expected, atol=1e-5)


def test_the_kernels_nested_sdpa_calls_on_cuda_name_their_backend() -> None:
    """On CUDA, nested SDPA calls the varlen kernels beneath the public ops: those must still name the backend."""
    assert sdpa_backend({"_flash_attention_forward", "mm"}) == "flash"
    assert sdpa_backend({"_efficient_attention_forward"}) == "efficient"
    assert sdpa_backend({"_cudnn_attention_forward"}) == "cudnn"


def test_a_row_with_nested_ops_names_them_as_uncounted(nested_rows: Any) -> None:
    """Its counted columns are a lower bound, and the row says so in data, not only in the docs."""
    row = nested_rows["bidirectional", "packed", "sdpa_nested"]
    assert "nested" in row["uncounted_ops"]
    assert row["model_disagreement"] != row["model_disagreement"]  # NaN: no comparison with the model
    assert pd.isna(nested_rows["bidirectional", "packed", "naive"]["uncounted_ops"])  # everything counted
