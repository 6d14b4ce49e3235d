"""The GPU configs: they load, the packaged GPU default is configs/gpu-default.yaml, and the default
sweep fits its two-minute budget on an H100 by the cost model (the estimate docs/gpu.md quotes)."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest
import torch

from mhabench.config import Case, expand_cases, load_config
from mhabench.impls import flash_attn_peer, get_spec, xformers_peer  # noqa: F401  (registers the peers)
from mhabench.modes import workload
from mhabench.reference import SAMPLE_ABOVE_SCORES

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
GPU_CONFIGS = sorted(CONFIGS.glob("gpu-*.yaml"))
CUDA = torch.device("cuda")  # expand_cases only reads the device's type

# H100 SXM: datasheet peaks; efficiencies are what such layers reach there (FlashAttention-class kernels
# ~55 %, materialized layouts ~35 %, per-head loops ~30 %); per row a fixed 80 ms of Python and I/O.
PEAK_FLOPS, PEAK_BYTES_PER_S, FP64_FLOPS, HOST_RANDN_PER_S = 989e12, 3.35e12, 40e12, 150e6
EFFICIENCY = {"fused": 0.55, "materialized": 0.35, "per_head": 0.3}
FLUSH_S, ROW_OVERHEAD_S, MIN_CALL_S, DEVICE_BYTES = 0.1e-3, 0.08, 30e-6, 80e9


def row_seconds(case: Case, impl: str, timing: dict[str, float]) -> float:
    """Warm-up, check, memory, estimate, the timed calls and the host-timed ones, at the roofline × efficiency."""
    model = get_spec(impl).cost
    cost = model(workload(case))
    if cost.predicted_peak_bytes > 0.9 * DEVICE_BYTES:
        return ROW_OVERHEAD_S  # oom or skipped at once
    call_s = max(cost.flops / (EFFICIENCY[model.name] * PEAK_FLOPS), cost.bytes_moved / (0.8 * PEAK_BYTES_PER_S))
    call_s = max(call_s, MIN_CALL_S) + FLUSH_S
    calls = min(max(math.ceil(timing["min_run_time_s"] / call_s), timing["min_samples"]),
                max(math.floor(timing["max_run_time_s"] / call_s), 1))  # fmt: skip
    return (timing["warmup_runs"] + 5 + calls + min(calls, 20)) * call_s + ROW_OVERHEAD_S


def case_seconds(case: Case) -> float:
    """The input drawn on the host in float64, and the float64 reference on the device."""
    w = workload(case)
    sampled = w.score_elements > SAMPLE_ABOVE_SCORES
    reference_flops = 4 * w.batch * w.kv_len * w.d_model * w.kv_dim + (
        0 if sampled else 4 * w.score_elements * w.head_dim
    )
    return w.batch * w.kv_len * w.d_model / HOST_RANDN_PER_S + reference_flops / FP64_FLOPS


def estimate_seconds(path: Path) -> float:
    config = load_config(path)
    timing = config.timing.model_dump()
    cases = expand_cases(config, CUDA)
    return sum(case_seconds(c) + sum(row_seconds(c, i, timing) for i in config.implementations) for c in cases)


@pytest.mark.parametrize("path", GPU_CONFIGS, ids=lambda p: p.name)
def test_gpu_configs_load(path: Path) -> None:
    config = load_config(path)
    assert config.device in ("auto", "cuda") and expand_cases(config, CUDA)


def test_packaged_gpu_default_is_the_config_file() -> None:
    packaged = resources.files("mhabench").joinpath("default_gpu.yaml").read_text(encoding="utf-8")
    assert packaged == (CONFIGS / "gpu-default.yaml").read_text(encoding="utf-8")


def test_gpu_default_is_the_issue_sweep() -> None:
    cases = expand_cases(load_config(CONFIGS / "gpu-default.yaml"), CUDA)
    assert {c.dtype for c in cases} == {"bfloat16"} and {c.head_dim for c in cases} == {128}
    assert {(c.d_model, c.heads) for c in cases} == {(4096, 32), (2048, 16)}
    assert {c.seq_len for c in cases} == {1024, 4096, 16384}
    assert {c.batch for c in cases} == {1, 8} and {c.causal for c in cases} == {False, True}


def test_gpu_default_fits_two_minutes_on_an_h100() -> None:
    assert 30 < estimate_seconds(CONFIGS / "gpu-default.yaml") < 120


def test_decode_sweep_inputs_fit_host_memory() -> None:
    """The runner draws each input in float64 on the host: keep the largest under 16 GB."""
    cases = expand_cases(load_config(CONFIGS / "gpu-decode.yaml"), CUDA)
    assert max(c.batch * (c.seq_len + 1) * c.d_model * 8 for c in cases) < 16e9
