"""The real peers: SDPA with a forced backend, torch.compile of naive, FlexAttention.

torch.compile is slow (seconds per graph), so each compiled module is built once per module:
one direct ``compiled`` module, and one tiny run through the runner with every peer.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import FIXED_PEAKS, TINY_TIMING
from plain_cases import plain_case
from torch._dynamo.utils import counters
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from mhabench import AttentionWeights, build
from mhabench.errors import UnsupportedError
from mhabench.impls import core_implementations, get_spec
from mhabench.impls.reference import TOLERANCE, numerical_error, reference_attention
from mhabench.measure.rounds import time_in_rounds
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.run import case as case_runner
from mhabench.run import runner
from mhabench.scenario.config import TimingConfig
from mhabench.scenario.loading import parse_config

SDPA = ["sdpa_math", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn"]
PEERS = [*SDPA, "compiled", "flex"]
CPU = torch.device("cpu")
FP32_TOL = TOLERANCE["float32"]
# (batch, seq_len, d_model, heads, bias, causal)
SHAPES = [(1, 8, 16, 1, False, False), (2, 7, 16, 4, True, True), (1, 13, 24, 3, True, False)]


def inputs(batch: int, seq_len: int, d_model: int, bias: bool) -> tuple[AttentionWeights, torch.Tensor]:
    weights = AttentionWeights.random(d_model, bias=bias, seed=3)
    return weights, torch.randn(batch, seq_len, d_model, generator=torch.Generator().manual_seed(4))


def runs_on_cpu(name: str) -> bool:
    """Whether torch has a CPU kernel for this forced backend (asked of torch, not assumed)."""
    backend = {"sdpa_math": SDPBackend.MATH, "sdpa_flash": SDPBackend.FLASH_ATTENTION}.get(name)
    if backend is None:
        return False
    q = torch.zeros(1, 1, 2, 4)
    try:
        with sdpa_kernel(backend):
            torch.nn.functional.scaled_dot_product_attention(q, q, q)
    except RuntimeError:
        return False
    return True


def test_peers_are_registered_but_not_in_the_default_set() -> None:
    for name in PEERS:
        assert not get_spec(name).core
        assert name not in core_implementations()
    assert [get_spec(name).compiles for name in PEERS] == [False] * 4 + [True, True]


# --- SDPA with a forced backend -----------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "b{}-n{}-d{}-h{}-bias{}-causal{}".format(*s))
@pytest.mark.parametrize("name", ["sdpa_math", "sdpa_flash"])
def test_sdpa_cpu_backends_match_reference_and_naive(name: str, shape: tuple[int, int, int, int, bool, bool]) -> None:
    batch, seq_len, d_model, heads, bias, causal = shape
    weights, x = inputs(batch, seq_len, d_model, bias)
    with torch.no_grad():
        out = build(name, weights, heads, CAUSAL if causal else PLAIN)(x)
        naive = build("naive", weights, heads, CAUSAL if causal else PLAIN)(x)
    assert numerical_error(out, reference_attention(weights, x, heads, CAUSAL if causal else PLAIN))[1] < FP32_TOL
    torch.testing.assert_close(out, naive, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["sdpa_efficient", "sdpa_cudnn"])
def test_cuda_only_backends_raise_unsupported_on_cpu(name: str) -> None:
    weights, x = inputs(1, 8, 16, False)
    with pytest.raises(UnsupportedError, match=r"has no (EFFICIENT|CUDNN)_ATTENTION SDPA kernel for cpu/float32"):
        build(name, weights, 2, CAUSAL)(x)


@pytest.mark.cuda
@pytest.mark.parametrize("name", SDPA)
def test_sdpa_backends_on_cuda_match_reference_or_say_unsupported(name: str) -> None:
    weights = AttentionWeights.random(64, seed=3, dtype=torch.float16, device="cuda")
    x = torch.randn(2, 32, 64, device="cuda", dtype=torch.float16)
    try:
        with torch.no_grad():
            out = build(name, weights, 4, CAUSAL)(x)
    except UnsupportedError as exc:
        assert "has no" in str(exc)
        return
    assert numerical_error(out, reference_attention(weights, x, 4, CAUSAL))[1] < TOLERANCE["float16"]


def test_sdpa_math_flops_match_cost_model() -> None:
    """FlopCounterMode counts the math backend's bmm (not the CPU flash kernel), so cross-check math."""
    case = plain_case("t", 2, 7, 16, 4, causal=True, bias=True, dtype="float32", seed=0)
    weights, x = inputs(2, 7, 16, True)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        build("sdpa_math", weights, 4, CAUSAL)(x)
    assert counter.get_total_flops() == get_spec("sdpa_math").cost(case.workload()).flops


# --- torch.compile of naive (one compile for the whole module) ------------------------------------


@pytest.fixture(scope="module")
def compiled_case() -> dict[str, object]:
    """A compiled module after its first (compiling) call, as the runner does it, plus what was seen."""
    weights, x = inputs(1, 16, 32, True)
    module = build("compiled", weights, 2, CAUSAL)
    graphs_before = counters["stats"]["unique_graphs"]
    output, groups, compile_time_s = case_runner.checked_call(get_spec("compiled"), lambda: module(x), CPU, None, True)
    return {
        "weights": weights,
        "x": x,
        "module": module,
        "output": output,
        "groups": groups,
        "compile_time_s": compile_time_s,
        "graphs_compiled": counters["stats"]["unique_graphs"] - graphs_before,
    }


def test_compiled_matches_naive_and_reference(compiled_case: dict) -> None:
    weights, x, output = compiled_case["weights"], compiled_case["x"], compiled_case["output"]
    with torch.no_grad():
        naive = build("naive", weights, 2, CAUSAL)(x)
    torch.testing.assert_close(output, naive, rtol=1e-5, atol=1e-5)
    assert numerical_error(output, reference_attention(weights, x, 2, CAUSAL))[1] < FP32_TOL


def test_first_call_compiles_once_and_timing_never_recompiles(compiled_case: dict) -> None:
    assert compiled_case["graphs_compiled"] == 1
    assert compiled_case["compile_time_s"] > 0
    # not under the dispatch tracker (it would bypass the graph): no CPU memory, no ops seen
    [memory] = compiled_case["groups"]
    assert math.isnan(memory.peak_memory_bytes) and memory.memory_method == case_runner.COMPILED_CPU_MEMORY
    module, x = compiled_case["module"], compiled_case["x"]
    graphs_before = counters["stats"]["unique_graphs"]
    with torch.inference_mode():
        time_in_rounds({"module": lambda: module(x)}, CPU, TimingConfig(**TINY_TIMING), 0)
    assert counters["stats"]["unique_graphs"] == graphs_before  # latency samples hold no compilation


def test_compiled_flops_under_flop_counter(compiled_case: dict) -> None:
    """FlopCounterMode is a dispatch mode, so Dynamo runs the module eagerly: the count is naive's math."""
    case = plain_case("t", 1, 16, 32, 2, causal=True, bias=True, dtype="float32", seed=0)
    with torch.no_grad(), warnings.catch_warnings(), FlopCounterMode(display=False) as counter:
        warnings.simplefilter("ignore")  # torch warns that FlopCounterMode's module hooks fire twice
        compiled_case["module"](compiled_case["x"])
    assert counter.get_total_flops() == get_spec("compiled").cost(case.workload()).flops


# --- every peer through the runner ----------------------------------------------------------------


@pytest.fixture(scope="module")
def peer_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pd.DataFrame]:
    config = parse_config(
        {
            "name": "peers",
            "device": "cpu",
            "implementations": ["naive", *PEERS],
            "timing": dict(TINY_TIMING),
            "scenarios": [{"batch": 1, "seq_len": 16, "d_model": 32, "heads": 2, "causal": True}],
        },
        "peers.yaml",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
        result = runner.run(config, Path(tmp_path_factory.mktemp("peers")))
    yield result.frame.set_index("impl")


def test_every_peer_has_a_row(peer_rows: pd.DataFrame) -> None:
    assert sorted(peer_rows.index) == sorted(["naive", *PEERS])


def test_peers_that_run_match_the_reference(peer_rows: pd.DataFrame) -> None:
    ran = peer_rows[peer_rows["status"] == "ok"]
    assert {"naive", "compiled"} <= set(ran.index)
    assert {name for name in ["sdpa_math", "sdpa_flash"] if runs_on_cpu(name)} <= set(ran.index)
    assert (ran["max_rel_err"] < FP32_TOL).all()
    assert peer_rows.loc["sdpa_flash", "sdpa_backend"] == "flash"
    assert peer_rows.loc["sdpa_math", "sdpa_backend"] == "math"


def test_cuda_only_backends_are_unsupported_rows_with_a_reason(peer_rows: pd.DataFrame) -> None:
    for name in ["sdpa_efficient", "sdpa_cudnn"]:
        row = peer_rows.loc[name]
        assert row["status"] == "unsupported"
        assert "kernel for cpu/float32" in row["error"] and "\n" not in row["error"]
        assert math.isnan(row["latency_ms"])


def test_flex_runs_or_says_why(peer_rows: pd.DataFrame) -> None:
    row = peer_rows.loc["flex"]
    assert row["status"] in ("ok", "unsupported"), row["error"]
    if row["status"] == "ok":
        assert row["max_rel_err"] < FP32_TOL and row["compile_time_s"] > 0
    else:
        assert row["error"].startswith("torch.compile")


def test_compile_time_is_its_own_column(peer_rows: pd.DataFrame) -> None:
    compiled = peer_rows.loc["compiled"]
    assert compiled["compile_time_s"] > 0
    assert compiled["latency_ms"] > 0
    assert peer_rows.loc[["naive", "sdpa_math", "sdpa_flash"], "compile_time_s"].isna().all()


def test_compiled_memory_is_not_faked_on_cpu(peer_rows: pd.DataFrame) -> None:
    """Under the dispatch tracker torch.compile runs eagerly: the row says so instead of giving naive's bytes."""
    compiled = peer_rows.loc["compiled"]
    assert math.isnan(compiled["peak_memory_bytes"])
    assert compiled["memory_method"] == case_runner.COMPILED_CPU_MEMORY
    assert peer_rows.loc["naive", "peak_memory_bytes"] > 0


def test_a_backend_refusing_grouped_kv_heads_says_so_and_passes_on_torchs_reasons() -> None:
    """The H100 masks run's sdpa_efficient rows said only "no kernel for cuda/bfloat16 with head_dim 128", while
    that backend ran at that dtype and head_dim: the cases had 8 K/V heads for 32 query heads, which torch's
    efficient backend does not take. The reason now names them (and torch's own words, where it warned)."""
    weights = AttentionWeights.random(16, seed=0, kv_dim=8)  # 4 query heads of 4, 2 K/V heads
    x = torch.randn(1, 8, 16)
    with pytest.raises(UnsupportedError) as refused:
        build("sdpa_efficient", weights, 4, CAUSAL)(x)
    text = str(refused.value)
    assert "grouped K/V heads (2 K/V heads for 4 query heads, enable_gqa)" in text
    assert "EFFICIENT_ATTENTION backend does not take" in text
    assert "\n" not in text and "Triggered internally" not in text


def test_without_grouped_heads_the_reason_does_not_blame_them() -> None:
    weights, x = inputs(1, 8, 16, False)
    with pytest.raises(UnsupportedError) as refused:
        build("sdpa_efficient", weights, 2, CAUSAL)(x)
    assert "grouped" not in str(refused.value)


def test_torchs_warnings_become_one_reason_without_headers_or_locations() -> None:
    import warnings

    from torch.nn.attention import SDPBackend

    from mhabench.impls.sdpa import _torch_reasons

    def refuses() -> None:
        warnings.warn("Memory efficient kernel not used because: (Triggered internally at x.cpp:1.)", stacklevel=1)
        warnings.warn("Efficient attention requires equal heads. (Triggered internally at y.cpp:2.)", stacklevel=1)
        raise RuntimeError("No available kernel.  Aborting execution.")

    assert _torch_reasons(refuses, SDPBackend.MATH) == "Efficient attention requires equal heads."
