"""The fp8 layer on the CPU: its unsupported reasons, its scales, its tolerance, its graph cache, and the graph
building through a fake cuDNN frontend (tests/fake_cudnn.py).

The fake proves wiring only: the calls the layer makes, in the frontend's order and with its arguments,
and that scales and descales are applied consistently end to end. cuDNN's kernel, its speed and its exact
error need an sm90 GPU (``make gpu-check``, check ``fp8_attention``; docs/gpu.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from fake_cudnn import DataType, FakeFrontend, HeurMode

from mhabench import cost
from mhabench.errors import UnsupportedError
from mhabench.impls import build, get_spec
from mhabench.impls import fused_fp8 as layer
from mhabench.impls.cudnn_fp8 import GraphCache, GraphKey, Uid, build_graph, frontend_unsupported_reason
from mhabench.impls.fp8 import (
    E4M3_MAX,
    E4M3_UNIT_ROUNDOFF,
    FP8_ROUNDINGS,
    FP8_TOLERANCE,
    PROBABILITY_SCALE,
    derived_tolerance,
    pow2_scale,
    quantize,
    quantize_weight,
    scaled_linear,
)
from mhabench.impls.reference import TOLERANCE, check_output, reference_attention
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.op_counts import counted
from mhabench.measure.peaks import DevicePeaks, datasheet_peaks
from mhabench.measure.trackers import DispatchTracker
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.results.schema import CaseIdentity, LatencyStats, ModelledCost, Outcome, ResultRow
from mhabench.run.case import screen
from mhabench.run.placement import placed
from mhabench.scenario.cases import Case, expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.loading import load_config

CUDA = torch.device("cuda", 0)
KEY = GraphKey(batch=2, seq_len=64, heads=4, kv_heads=2, head_dim=32, causal=True, device_index=0)


def on_gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], name: str = "NVIDIA H100 80GB HBM3") -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)


# --- unsupported reasons ------------------------------------------------------------------------------


def test_cpu_is_unsupported_with_the_reason() -> None:
    assert "not cpu" in frontend_unsupported_reason(FakeFrontend(), torch.device("cpu"))
    weights = AttentionWeights.random(64, dtype=torch.bfloat16)
    with pytest.raises(UnsupportedError, match="fused_fp8: needs a CUDA GPU of sm90"):
        build("fused_fp8", weights, 4)


def test_a_gpu_below_sm90_is_unsupported_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    on_gpu(monkeypatch, (8, 0), "NVIDIA A100-SXM4-80GB")
    reason = frontend_unsupported_reason(FakeFrontend(), CUDA)
    assert reason is not None and "sm90" in reason and "A100-SXM4-80GB is sm80" in reason


def test_without_the_frontend_the_reason_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    on_gpu(monkeypatch, (9, 0))
    assert "nvidia-cudnn-frontend not installed" in frontend_unsupported_reason(None, CUDA)


def test_a_cudnn_older_than_9_1_is_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    on_gpu(monkeypatch, (9, 0))
    assert "cuDNN 90000 < 90100" in frontend_unsupported_reason(FakeFrontend(version=90000), CUDA)
    assert frontend_unsupported_reason(FakeFrontend(version=91900), CUDA) is None
    on_gpu(monkeypatch, (10, 0), "NVIDIA B200")
    assert frontend_unsupported_reason(FakeFrontend(), CUDA) is None


def test_a_missing_frontend_is_no_error() -> None:
    """The CPU test machines have no ``cudnn`` package: load_frontend says so with None, not an ImportError."""
    assert layer.load_frontend() is None or hasattr(layer.load_frontend(), "pygraph")


@pytest.mark.parametrize(
    ("fields", "dtype", "reason"),
    [
        ({}, "float16", "no float16 support (dtypes: bfloat16)"),
        ({"mode": ["train"]}, "bfloat16", "no backward pass"),
        ({"phase": ["decode"]}, "bfloat16", "no KV-cache decode step"),
        ({"mask": ["sliding_window"], "window": [16]}, "bfloat16", "no sliding_window mask"),
    ],
)
def test_what_the_layer_cannot_run_is_screened_before_it_is_built(
    fields: dict[str, object], dtype: str, reason: str
) -> None:
    outcome = screen(get_spec("fused_fp8"), one_case(fields, dtype, CUDA), CUDA, guard=False)
    assert outcome is not None and outcome.status == "unsupported" and reason in outcome.error


def test_a_cpu_case_is_screened_as_cuda_only() -> None:
    cpu = torch.device("cpu")
    outcome = screen(get_spec("fused_fp8"), one_case({}, "bfloat16", cpu), cpu, guard=False)
    assert outcome is not None and "runs on cuda only, not cpu" in outcome.error


def one_case(fields: dict[str, object], dtype: str, device: torch.device) -> Case:
    scenario = {"name": "s", "batch": [1], "seq_len": [64], "d_model": [64], "heads": [4], **fields}
    (case,) = expand_cases(RunConfig.model_validate({"scenarios": [scenario], "dtype": [dtype]}), device)
    return case


# --- scales ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("amax", [1e-6, 0.013, 1.0, 3.0, 224.0, 448.0, 449.0, 7e4])
def test_the_scale_is_the_largest_power_of_two_that_keeps_amax_within_448(amax: float) -> None:
    scale = pow2_scale(torch.tensor(amax)).item()
    assert math.log2(scale) == round(math.log2(scale))
    assert amax * scale <= E4M3_MAX < 2 * amax * scale


def test_an_all_zero_tensor_gets_a_finite_scale() -> None:
    packed = quantize(torch.zeros(4, 8, dtype=torch.bfloat16))
    assert math.isfinite(packed.scale.item()) and packed.dequantized().abs().max().item() == 0


def test_quantizing_rounds_each_element_by_at_most_the_unit_roundoff() -> None:
    """Power-of-two scaling is exact; the one rounding to 3 mantissa bits is the error (normal numbers)."""
    t = torch.randn(256, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    packed = quantize(t)
    assert packed.data.dtype == torch.float8_e4m3fn and packed.data.float().abs().max().item() <= E4M3_MAX
    normal = packed.data.float().abs() >= 2.0**-6
    relative = ((packed.dequantized() - t.float()).abs() / t.float().abs())[normal]
    assert relative.max().item() <= E4M3_UNIT_ROUNDOFF
    assert relative.max().item() > E4M3_UNIT_ROUNDOFF / 2  # it does round: not a no-op


def test_a_weight_is_quantized_column_major_for_scaled_mm() -> None:
    w = torch.randn(64, 96, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    packed = quantize_weight(w)
    assert packed.data.shape == (64, 96) and packed.data.t().is_contiguous()
    assert torch.allclose(packed.dequantized(), w.float(), rtol=E4M3_UNIT_ROUNDOFF, atol=1e-3)


def test_the_fp8_gemm_applies_both_descales_and_the_bias() -> None:
    generator = torch.Generator().manual_seed(2)
    x = (100 * torch.randn(2, 16, 64, generator=generator)).to(torch.bfloat16)  # a scale far from 1
    w = (torch.randn(64, 32, generator=generator) / 80).to(torch.bfloat16)
    bias = torch.randn(32, generator=generator).to(torch.bfloat16)
    out = scaled_linear(quantize(x), quantize_weight(w), bias, torch.bfloat16)
    exact = x.double() @ w.double() + bias.double()
    assert out.shape == (2, 16, 32) and out.dtype == torch.bfloat16
    assert (out.double() - exact).abs().max().item() / exact.abs().max().item() < FP8_TOLERANCE


# --- tolerance ---------------------------------------------------------------------------------------


def test_the_fp8_tolerance_follows_from_the_unit_roundoff_and_the_roundings() -> None:
    """2 · √(r/3) · u with u = 2⁻⁴ (3 mantissa bits) and r = 6 roundings (x, W_qkv, Q/K/V, P, O, W_o)."""
    assert E4M3_UNIT_ROUNDOFF == 2.0**-4
    assert FP8_ROUNDINGS == ("x", "W_qkv", "Q/K/V", "P", "O", "W_o")
    assert pytest.approx(2 * math.sqrt(2) / 16) == FP8_TOLERANCE
    assert derived_tolerance(E4M3_UNIT_ROUNDOFF, 3) < FP8_TOLERANCE < derived_tolerance(E4M3_UNIT_ROUNDOFF, 12)
    assert TOLERANCE["float8_e4m3fn"] == FP8_TOLERANCE


def test_the_other_dtypes_tolerances_are_not_loosened() -> None:
    assert {k: v for k, v in TOLERANCE.items() if k != "float8_e4m3fn"} == {
        "float32": 1e-3,
        "float16": 1e-2,
        "bfloat16": 4e-2,
    }


def test_the_registry_declares_the_compute_dtype_the_check_and_roof_use() -> None:
    spec = get_spec("fused_fp8")
    assert spec.compute_dtype == "float8_e4m3fn" and spec.capabilities.dtypes == frozenset({"bfloat16"})
    assert get_spec("fused").compute_dtype is None


# --- the graph cache and the graph ------------------------------------------------------------------


def test_the_graph_key_separates_shape_mask_and_device() -> None:
    assert GraphKey(2, 64, 4, 2, 32, True, 0) == KEY
    others = [
        GraphKey(1, 64, 4, 2, 32, True, 0),
        GraphKey(2, 128, 4, 2, 32, True, 0),
        GraphKey(2, 64, 4, 4, 32, True, 0),
        GraphKey(2, 64, 4, 2, 32, False, 0),
        GraphKey(2, 64, 4, 2, 32, True, 1),
    ]
    assert len({KEY, *others}) == 6
    assert KEY.qkv_width == (4 + 2 * 2) * 32
    assert KEY.qkv_strides() == (64 * 256, 32, 256, 1) and KEY.output_strides() == (64 * 128, 32, 128, 1)


def test_a_shape_is_built_once_and_reused() -> None:
    frontend = FakeFrontend()
    graphs = GraphCache(frontend, torch.device("cpu"))
    first = graphs.get(KEY)
    assert graphs.get(KEY) is first and len(frontend.graphs) == 1
    graphs.get(GraphKey(2, 128, 4, 2, 32, True, 0))
    assert len(frontend.graphs) == 2 and frontend.handles_created == 1


def test_the_graph_is_declared_and_built_in_the_frontends_order() -> None:
    frontend = FakeFrontend()
    build_graph(frontend, KEY, frontend.handle, torch.device("cpu"))
    (graph,) = frontend.graphs
    assert graph.options == {
        "io_data_type": DataType.FP8_E4M3,
        "intermediate_data_type": DataType.FLOAT,
        "compute_data_type": DataType.FLOAT,
        "handle": frontend.handle,
    }
    steps = ["validate", "build_operation_graph", "create_execution_plans", "check_support", "build_plans"]
    assert graph.calls == ["tensor"] * 9 + ["sdpa_fp8", *steps]
    assert graph.plan_modes == [HeurMode.A, HeurMode.FALLBACK]
    assert graph.sdpa["is_inference"] is True and graph.sdpa["use_causal_mask"] is True
    assert graph.sdpa["attn_scale"] == pytest.approx(1 / math.sqrt(32))
    declared = graph.by_uid()
    assert declared[Uid.Q].attributes["dim"] == (2, 4, 64, 32) and declared[Uid.K].attributes["dim"] == (2, 2, 64, 32)
    assert declared[Uid.V].attributes["stride"] == KEY.qkv_strides()
    out = declared[Uid.O].attributes
    assert out["output"] and out["data_type"] == DataType.FP8_E4M3 and out["stride"] == KEY.output_strides()
    assert all(declared[uid].attributes["data_type"] == DataType.FLOAT for uid in (Uid.AMAX_S, Uid.AMAX_O))


def test_a_shape_cudnn_has_no_plan_for_is_an_unsupported_row() -> None:
    frontend = FakeFrontend(refuse_at="check_support")
    with pytest.raises(UnsupportedError, match="cuDNN has no fp8 attention plan for GraphKey"):
        build_graph(frontend, KEY, frontend.handle, torch.device("cpu"))


# --- the layer end to end through the fake --------------------------------------------------------------


@pytest.fixture
def fake_layer(monkeypatch: pytest.MonkeyPatch) -> FakeFrontend:
    """``fused_fp8`` built on the CPU against the fake frontend (the device check passes)."""
    frontend = FakeFrontend()
    monkeypatch.setattr(layer, "load_frontend", lambda: frontend)
    monkeypatch.setattr(layer, "frontend_unsupported_reason", lambda found, device: None)
    return frontend


@pytest.mark.parametrize(("d_model", "heads"), [(40, 4), (96, 8), (72, 3)])
def test_a_width_fp8_gemms_and_heads_cannot_align_is_unsupported_when_built(
    fake_layer: FakeFrontend, d_model: int, heads: int
) -> None:
    """torch._scaled_mm refuses GEMM widths not divisible by 16 and cuDNN reads e4m3 heads at 16-byte offsets: such a
    shape is an unsupported row naming both widths, raised at build time, never a failed call (issue 31)."""
    weights = AttentionWeights.random(d_model, dtype=torch.bfloat16)
    head_dim = d_model // heads
    with pytest.raises(UnsupportedError, match=f"got d_model {d_model}, head_dim {head_dim}"):
        build("fused_fp8", weights, heads)
    assert layer.misaligned_reason(128, 32) is None and layer.misaligned_reason(4096, 128) is None


@pytest.mark.parametrize(("causal", "kv_dim"), [(False, 128), (True, 128), (True, 32)])
def test_the_layer_matches_the_float64_reference_within_the_derived_tolerance(
    fake_layer: FakeFrontend, causal: bool, kv_dim: int
) -> None:
    """bf16 in, bf16 out; every scale and descale applied once: the output within the fp8 tolerance, and
    really rounded (far above bf16's own error)."""
    weights = AttentionWeights.random(128, dtype=torch.bfloat16, kv_dim=kv_dim, bias=True)
    x = torch.randn(2, 64, 128, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
    module = build("fused_fp8", weights, 4, CAUSAL if causal else PLAIN)
    out = module(x)
    assert out.dtype == torch.bfloat16 and out.shape == x.shape
    check = check_output(out, reference_attention(weights, x, 4, CAUSAL if causal else PLAIN), "float8_e4m3fn")
    assert check.ok, check.reason
    assert check.max_rel_err > 0.01
    module(x)
    (graph,) = fake_layer.graphs
    assert graph.executions == 2 and fake_layer.streams == [0, 0]


def test_the_tolerance_still_catches_a_wrong_mask(fake_layer: FakeFrontend) -> None:
    """A causal layer compared with the non-causal reference fails the fp8 check: the tolerance is not so loose
    that a wrong mask passes."""
    weights = AttentionWeights.random(128, dtype=torch.bfloat16)
    x = torch.randn(1, 64, 128, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    check = check_output(
        build("fused_fp8", weights, 4, CAUSAL)(x), reference_attention(weights, x, 4, PLAIN), "float8_e4m3fn"
    )
    assert not check.ok and "max_rel_err" in check.reason


def test_the_probability_scale_is_e4m3s_bound() -> None:
    assert PROBABILITY_SCALE == E4M3_MAX


# --- the cost model -------------------------------------------------------------------------------------


def test_the_cost_model_counts_fused_flops_and_fp8_bytes() -> None:
    w = cost.Workload(batch=2, seq_len=64, kv_len=64, d_model=128, heads=4, kv_heads=4, head_dim=32, element_bytes=2)
    fp8, bf16 = cost.FUSED_FP8(w), cost.FUSED_DENSE_MASK(w)
    assert fp8.flops == bf16.flops and fp8.useful_flops == bf16.useful_flops
    tokens, width = 128, 384
    projections = (
        (2 * 2 + 1) * tokens * 128  # x: amax read, then quantize (read bf16, write e4m3)
        + (tokens * 128 + 128 * width)
        + 2 * tokens * width  # QKV GEMM on e4m3, bf16 out
        + (2 * 2 + 1) * tokens * width  # Q/K/V: amax read, then quantize
        + (tokens * 128 + 128 * 128)
        + 2 * tokens * 128  # W_o GEMM on e4m3, bf16 out
    )
    assert fp8.proj_bytes == projections
    assert fp8.attn_bytes == 2 * tokens * 128 + 2 * 2 * 4 * 64 * 32  # Q and O, K and V: one byte each
    assert fp8.attn_bytes < bf16.attn_bytes


def test_the_counter_sees_the_fp8_gemms_and_names_the_attention_it_cannot_count(fake_layer: FakeFrontend) -> None:
    """The cuDNN graph runs inside the custom op ``mhabench::cudnn_fp8_attention``: the dispatch tracker counts the
    two ``_scaled_mm`` GEMMs' FLOPs and names the attention among the uncounted ops, so the row is placed by the
    cost model rather than by counts that miss the attention."""
    weights = AttentionWeights.random(128, dtype=torch.bfloat16)
    x = torch.randn(2, 64, 128, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    module = build("fused_fp8", weights, 4, PLAIN)
    with torch.no_grad(), DispatchTracker() as tracker:
        module(x)
    counts = tracker.counts()
    assert "cudnn_fp8_attention" in counts.opaque_ops
    workload = cost.Workload(2, 64, 64, 128, 4, 4, 32, 2)
    assert counts.flops == cost.FUSED_FP8(workload).proj_flops
    row = counted(counts, ModelledCost.from_cost(cost.FUSED_FP8(workload)))
    assert row.uncounted_ops == "cudnn_fp8_attention" and row.model_disagreement is None


@pytest.mark.parametrize("impl", ["fused_fp8", "fused"])
def test_an_fp8_row_is_placed_on_the_fp8_roof_and_a_bf16_row_on_the_bf16_one(impl: str) -> None:
    case = one_case({}, "bfloat16", CUDA)
    model = get_spec(impl).cost
    assert model is not None
    row = ResultRow(CaseIdentity.of(case, impl=impl), Outcome("ok", "")).with_groups(
        ModelledCost.from_cost(model(case.workload())), LatencyStats.from_samples((2.0,), 1, 0.1, math.nan)
    )
    h100 = datasheet_peaks("NVIDIA H100 80GB HBM3", torch.bfloat16)
    assert h100 is not None
    roof = placed(row, case, h100)
    fp8 = impl == "fused_fp8"
    assert roof.peak_tflops == (1979.0 if fp8 else 989.0)
    assert roof.roofline_source.endswith("(fp8 tensor rate)") is fp8
    assert roof.attainable_tflops is not None and roof.achieved_useful_tflops is not None


def test_an_fp8_row_without_a_known_fp8_rate_gets_its_throughput_only() -> None:
    case = one_case({}, "bfloat16", CUDA)
    row = ResultRow(CaseIdentity.of(case, impl="fused_fp8"), Outcome("ok", ""))
    row = row.with_groups(LatencyStats.from_samples((2.0,), 1, 0.1, math.nan))
    roof = placed(row, case, DevicePeaks(500.0, 2000.0, "measured"))
    assert roof.tokens_per_s == pytest.approx(64 / 2e-3) and roof.peak_tflops is None
    assert roof.roofline_source == "measured; no float8_e4m3fn tensor rate known for this device"


def test_the_fp8_config_is_the_issues_sweep() -> None:
    """configs/gpu-fp8.yaml: fused_fp8 beside bf16 fused at n 4k, 8k, 16k, d_model 4096, 32 heads, b 1 and 8,
    causal and not, all in bf16 cases so each speedup is paired."""
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "gpu-fp8.yaml")
    cases = expand_cases(config, CUDA)
    assert config.implementations == ["fused", "fused_fp8"]
    assert {(c.dtype, c.d_model, c.heads, c.head_dim) for c in cases} == {("bfloat16", 4096, 32, 128)}
    assert sorted((c.batch, c.seq_len, c.causal) for c in cases) == sorted(
        (b, n, causal) for b in (1, 8) for n in (4096, 8192, 16384) for causal in (False, True)
    )
