"""Counted FLOPs and bytes of the dispatched ops, the model-disagreement flag, CUDA kernels per call."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from plain_cases import plain_case
from plugins_nanogpt import CausalSelfAttention, ManualCausalSelfAttention
from torch.autograd import DeviceType
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from mhabench import AttentionWeights, build
from mhabench.impls import get_spec
from mhabench.impls.reference import check_output, expected_output
from mhabench.measure.op_counts import DISAGREEMENT_LIMIT, OpCounts, count_cuda_kernels, counted
from mhabench.measure.trackers import DispatchTracker
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.results.schema import ModelledCost
from mhabench.run.steps import prepare
from mhabench.scenario.cases import Case

F32 = 4  # bytes per float32 element


def count(fn: Callable[[], Any]) -> OpCounts:
    """The counts of one call, taken the way the runner takes them."""
    with torch.no_grad(), DispatchTracker() as tracker:
        fn()
    return tracker.counts()


# --- the rules, op by op -----------------------------------------------------------------------


def test_a_matmul_is_2mkn_flops_and_reads_and_writes_each_operand_once() -> None:
    b, m, k, n = 2, 3, 5, 7
    x, w = torch.randn(b, m, k), torch.randn(k, n)
    counts = count(lambda: x @ w)
    assert counts.flops == 2 * b * m * k * n
    assert counts.bytes_moved == (b * m * k + k * n + b * m * n) * F32
    assert counts.intensity == pytest.approx(2 * b * m * k * n / ((b * m * k + k * n + b * m * n) * F32))


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b, c: torch.mm(a[0], b[0]),
        lambda a, b, c: torch.bmm(a, b),
        lambda a, b, c: torch.addmm(c[0, 0], a[0], b[0]),
        lambda a, b, c: torch.baddbmm(c, a, b),
    ],
    ids=["mm", "bmm", "addmm", "baddbmm"],
)
def test_matmul_flops_equal_flop_counter_mode(call: Callable[..., torch.Tensor]) -> None:
    a, b, c = torch.randn(3, 4, 6), torch.randn(3, 6, 5), torch.randn(3, 4, 5)
    reference = FlopCounterMode(display=False)
    with reference:
        call(a, b, c)
    assert count(lambda: call(a, b, c)).flops == reference.get_total_flops() > 0


def test_views_move_nothing() -> None:
    x = torch.randn(2, 3, 4, 5)

    def views() -> torch.Tensor:
        y = x.view(6, 20).t().reshape(20, 6).unsqueeze(0).expand(3, 20, 6)
        y = y.permute(2, 1, 0)[1:, ::2].select(0, 1).detach().transpose(0, 1)
        return torch.as_strided(y, (2, 2), (1, 1)).narrow(1, 0, 1).squeeze().view(2)

    with torch.no_grad(), DispatchTracker() as tracker:
        views()
    assert tracker.result().ops_per_call >= 10  # the views were dispatched, and moved nothing
    assert tracker.counts() == OpCounts(0, 0)


N = 1000
_x, _y, _out, _bias = torch.randn(N), torch.randn(N), torch.empty(N), torch.randn(10)


@pytest.mark.parametrize(
    ("call", "elements_moved"),
    [
        (lambda: _x.view(10, 100).t().contiguous(), 2 * N),  # a copy: read and write
        (lambda: _x * _y, 3 * N),
        (lambda: _x * _x, 2 * N),  # the same tensor twice is read once
        (lambda: _x.clone().add_(_y), 2 * N + 3 * N),  # in place: reads both, writes its target
        (lambda: torch.add(_x, _y, out=_out), 3 * N),  # out=: written, not read
        (lambda: _out.copy_(_x), 2 * N),  # copy_ overwrites its target without reading it
        (lambda: _x.view(100, 10) + _bias.expand(100, 10), N + 10 + N),  # a broadcast operand is read once
        (lambda: torch.zeros_like(_x), N),  # the template's data is not read
        (lambda: torch.empty(N), 0),  # allocated, never written
    ],
    ids=["contiguous", "mul", "square", "in-place", "out", "copy_", "broadcast", "zeros_like", "empty"],
)
def test_bytes_follow_the_read_once_write_once_rule(call: Callable[[], Any], elements_moved: int) -> None:
    assert count(call) == OpCounts(0, elements_moved * F32)


# --- attention -----------------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_cpu_flash_sdpa_is_counted_from_its_shapes_like_its_math_decomposition(causal: bool) -> None:
    """FlopCounterMode counts 0 for the CPU flash kernel; counted here, every score included (causal too)."""
    b, h, n, d = 2, 4, 64, 16
    q, k, v = torch.randn(3, b, h, n, d).unbind()
    flops = 4 * b * h * n * n * d
    with torch.no_grad(), DispatchTracker() as flash:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), DispatchTracker() as math_path:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert (flash.result().sdpa_backend, math_path.result().sdpa_backend) == ("flash", "math")
    assert flash.counts().flops == math_path.counts().flops == flops
    # the flash kernel reads Q, K, V and writes O and its float32 log-sum-exp; no scores leave it
    assert flash.counts().bytes_moved == (4 * b * h * n * d + b * h * n) * F32


def test_grouped_query_sdpa_counts_every_query_head() -> None:
    b, h, kv_heads, n, length, d = 1, 8, 2, 16, 24, 8
    q, k, v = torch.randn(b, h, n, d), torch.randn(b, kv_heads, length, d), torch.randn(b, kv_heads, length, d)
    counts = count(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
    assert counts.flops == 4 * b * h * n * length * d


CASE_FIELDS = {"scenario": "s", "batch": 1, "seq_len": 512, "d_model": 256, "heads": 4, "dtype": "float32", "seed": 0}


def counted_case(name: str, case: Case) -> tuple[OpCounts, ModelledCost]:
    """The implementation's checked call counted, and its cost model on the same case."""
    spec = get_spec(name)
    weights = AttentionWeights.random(case.d_model, case.bias, seed=case.seed)
    x = torch.randn(case.batch, case.seq_len, case.d_model)
    _, step = prepare(spec, case, weights, x)
    counts = count(step.run)
    return counts, ModelledCost.from_cost(spec.cost(case.workload()))


@pytest.mark.parametrize(("causal", "bias"), [(False, False), (True, True)])
@pytest.mark.parametrize("name", ["naive", "per_head", "fused"])
def test_core_implementations_agree_with_their_cost_model(name: str, causal: bool, bias: bool) -> None:
    counts, model = counted_case(name, plain_case(**CASE_FIELDS, causal=causal, bias=bias))
    assert counts.flops == pytest.approx(model.flops, rel=0.01)
    assert counts.intensity == pytest.approx(model.arithmetic_intensity, rel=DISAGREEMENT_LIMIT)
    assert not counted(counts, model).model_disagrees


def test_fused_bytes_by_hand() -> None:
    """b=1, n=512, D=256, h=4: packed QKV GEMM, flash SDPA, W_o GEMM. The head merge is a view: the CPU
    flash kernel already writes its output in (b, n, h, d_k) order, so no copy happens."""
    counts, _ = counted_case("fused", plain_case(**CASE_FIELDS, causal=False, bias=False))
    tokens, d, heads = 512, 256, 4
    qkv_gemm = tokens * d + d * 3 * d + tokens * 3 * d
    attention = 3 * tokens * d + tokens * d + heads * tokens  # Q, K, V read; O and log-sum-exp written
    out_gemm = tokens * d + d * d + tokens * d
    assert counts.bytes_moved == (qkv_gemm + attention + out_gemm) * F32


def test_naive_bytes_by_hand() -> None:
    """b=1, n=512, D=256, h=4: three GEMMs, the 4×512×512 scores written by QKᵀ, read and written by the
    scale and by softmax, read by P·V; the head-merge copy; W_o."""
    counts, _ = counted_case("naive", plain_case(**CASE_FIELDS, causal=False, bias=False))
    tokens, d, scores = 512, 256, 4 * 512 * 512
    projections = 3 * (tokens * d + d * d + tokens * d)
    attention = 2 * tokens * d + scores + 2 * scores + 2 * scores + scores + tokens * d + tokens * d
    merge_and_out = 2 * tokens * d + tokens * d + d * d + tokens * d
    assert counts.bytes_moved == (projections + attention + merge_and_out) * F32


def test_train_step_counts_the_backward() -> None:
    """fused: GEMMs 3× forward, SDPA's backward 2.5× its forward — the cost model's convention, exactly.
    naive's materialized backward executes 2× its attention forward, which the model prices at 2.5×."""
    fields = {**CASE_FIELDS, "seq_len": 128, "causal": True, "bias": False, "mode": "train"}
    fused, fused_model = counted_case("fused", plain_case(**fields))
    assert fused.flops == fused_model.flops
    naive, naive_model = counted_case("naive", plain_case(**fields))
    assert naive.flops == naive_model.proj_flops + 3 * naive_model.attn_flops * 2 // 7


def test_inference_mode_counts_like_no_grad() -> None:
    """Under inference_mode composite ops (linear, SDPA) reach the dispatch mode whole; they are decomposed."""
    module, x = build("fused", AttentionWeights.random(64), 4, CAUSAL), torch.randn(1, 32, 64)
    with torch.inference_mode(), DispatchTracker() as inference:
        module(x)
    assert inference.counts() == count(lambda: module(x))
    assert inference.result().sdpa_backend == "flash"


def test_an_opaque_op_counts_its_flops_and_leaves_the_disagreement_empty() -> None:
    """torch_mha with a bias under no_grad runs one _native_multi_head_attention op."""
    case = plain_case(**{**CASE_FIELDS, "seq_len": 64}, causal=False, bias=True)
    counts, model = counted_case("torch_mha", case)
    assert counts.opaque_ops == ("_native_multi_head_attention",)
    assert counts.flops == model.flops
    row = counted(counts, model)
    assert (row.measured_bytes, row.model_disagreement, row.model_disagrees) == (counts.bytes_moved, None, None)


# --- a plugin with no cost model -----------------------------------------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_nanogpt_plugin_lands_near_the_layout_it_really_has(causal: bool) -> None:
    """The manual path writes the n×n scores like naive; the flash path calls SDPA like fused."""
    weights, x = AttentionWeights.random(256, bias=True), torch.randn(1, 512, 256)
    intensity = {}
    for name, module in [
        ("manual", ManualCausalSelfAttention(weights, 4, causal)),
        ("flash", CausalSelfAttention(weights, 4, causal)),
        ("naive", build("naive", weights, 4, CAUSAL if causal else PLAIN)),
        ("fused", build("fused", weights, 4, CAUSAL if causal else PLAIN)),
    ]:
        with torch.no_grad(), DispatchTracker() as tracker:
            output = module(x)
        assert check_output(output, expected_output(weights, x, 4, CAUSAL if causal else PLAIN), "float32").ok
        intensity[name] = tracker.counts().intensity
    assert intensity["manual"] == pytest.approx(intensity["naive"], rel=0.1)
    assert intensity["flash"] == pytest.approx(intensity["fused"], rel=0.1)
    assert intensity["flash"] > 3 * intensity["manual"]


# --- the disagreement flag -----------------------------------------------------------------------


def model_of(flops: int, bytes_moved: int) -> ModelledCost:
    return ModelledCost(flops=flops, bytes_moved=bytes_moved, arithmetic_intensity=flops / bytes_moved)


def test_counted_measures_the_gap_to_the_model() -> None:
    agree = counted(OpCounts(1000, 100), model_of(1000, 100))
    assert (agree.measured_intensity, agree.model_disagreement, agree.model_disagrees) == (10.0, 0.0, False)
    more_bytes = counted(OpCounts(1000, 130), model_of(1000, 100))
    assert (more_bytes.model_disagreement, more_bytes.model_disagrees) == (pytest.approx(0.3), True)
    fewer_flops = counted(OpCounts(800, 100), model_of(1000, 100))
    assert (fewer_flops.model_disagreement, fewer_flops.model_disagrees) == (pytest.approx(0.2), False)
    both = counted(OpCounts(500, 110), model_of(1000, 100))
    assert both.model_disagreement == pytest.approx(0.5)


def test_counted_without_a_model_leaves_the_gap_empty() -> None:
    row = counted(OpCounts(1000, 0), None)
    assert (row.measured_flops, row.measured_bytes) == (1000, 0)
    assert math.isnan(row.measured_intensity)
    assert (row.model_disagreement, row.model_disagrees) == (None, None)


# --- CUDA kernels per call -----------------------------------------------------------------------


def kernel_event(name: str, device_type: DeviceType = DeviceType.CUDA, annotation: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, device_type=device_type, is_user_annotation=annotation)


def test_count_cuda_kernels_counts_device_kernels_only(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        kernel_event("aten::mm", DeviceType.CPU),
        kernel_event("cudaLaunchKernel", DeviceType.CPU),
        kernel_event("sm90_xmma_gemm_bf16bf16_bf16f32"),
        kernel_event("pytorch_flash::flash_fwd_kernel"),
        kernel_event("Memcpy HtoD (Pageable -> Device)"),
        kernel_event("Memset (Device)"),
        kernel_event("## forward ##", annotation=True),
    ]
    calls: list[str] = []

    class FakeProfile:
        def __init__(self, activities: list[Any]) -> None:
            assert activities == [torch.profiler.ProfilerActivity.CUDA]

        def __enter__(self) -> FakeProfile:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def events(self) -> list[SimpleNamespace]:
            return events

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("sync"))
    assert count_cuda_kernels(lambda: calls.append("call"), torch.device("cuda")) == 2
    assert calls == ["sync", "call", "sync"]


def test_count_cuda_kernels_refuses_the_cpu() -> None:
    with pytest.raises(ValueError, match="needs a CUDA device"):
        count_cuda_kernels(lambda: None, torch.device("cpu"))


@pytest.mark.cuda
def test_count_cuda_kernels_on_a_gpu() -> None:
    """Kernels add up: two GEMMs launch twice one GEMM's kernels (cuBLAS may use more than one, e.g. a
    split-K reduction: 2 for this fp32 GEMM on an H200), an in-place ReLU one more. fused's bf16 forward
    is the packed QKV GEMM, one attention kernel and the W_o GEMM (the head merge is a view)."""
    device = torch.device("cuda")
    a, b = torch.randn(256, 256, device=device), torch.randn(256, 256, device=device)
    a @ b  # warm-up: cuBLAS initialisation is not the call's
    one_gemm = count_cuda_kernels(lambda: a @ b, device)
    assert one_gemm >= 1
    assert count_cuda_kernels(lambda: (a @ b, a @ b), device) == 2 * one_gemm
    assert count_cuda_kernels(lambda: (a @ b).relu_(), device) == one_gemm + 1
    weights = AttentionWeights.random(1024, dtype=torch.bfloat16, device=device)
    module, x = build("fused", weights, 8), torch.randn(1, 512, 1024, device=device, dtype=torch.bfloat16)
    with torch.no_grad():
        module(x)
        assert count_cuda_kernels(lambda: module(x), device) == 3


@torch.library.custom_op("mhabench_test::attend", mutates_args=())
def _custom_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


@_custom_attend.register_fake
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(q)


def test_a_custom_op_is_opaque_and_the_roofline_keeps_the_model() -> None:
    """A torch.library op (how flash_attn ≥ 2.6 ships its kernels) hides its FLOPs: the counts are a lower
    bound, no disagreement is claimed, and the row's roofline uses the cost model instead."""
    from mhabench.measure.peaks import DevicePeaks
    from mhabench.measure.roofline import roofline
    from mhabench.results.schema import LatencyStats

    q = k = v = torch.randn(1, 2, 64, 16)
    counts = count(lambda: _custom_attend(q, k, v))
    assert counts.opaque_ops == ("attend",) and counts.flops == 0
    case = plain_case("t", 1, 64, 32, 2, causal=False, bias=False, dtype="float32", seed=0)
    model = ModelledCost.from_cost(get_spec("fused").cost(case.workload()))
    row = counted(counts, model)
    assert row.model_disagreement is None and row.model_disagrees is None
    placed = roofline(
        case.workload().tokens, model, row, LatencyStats(latency_ms=1.0), DevicePeaks(1.0, 1.0, "test"), False
    )
    assert placed.intensity_source == "modelled" and placed.achieved_tflops == model.flops / 1e-3 / 1e12
