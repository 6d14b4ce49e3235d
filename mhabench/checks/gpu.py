"""``python3 -m mhabench.checks.gpu``: every CUDA path, one PASS/FAIL/SKIP line per check, in minutes.

Each check asserts what would be false if the code were wrong (a datasheet matching the device and its
own measurement, an exact allocator peak, the backend that really ran), never that a number is positive.
Figures go to ``OUT/gpu_check.json``; exit status 1 when a check fails; without CUDA all SKIP, status 0.
End-to-end checks run ``python3 -m mhabench run CONFIG`` in a subprocess and read results.csv; run it from
the repository root (configs/gpu-e2e.yaml, gpu-compiled.yaml). docs/gpu.md: ``make gpu-check``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
import yaml

from mhabench import cost
from mhabench.checks import counter_checks
from mhabench.cost import Workload
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls import build
from mhabench.impls.fp8 import FP8_TOLERANCE
from mhabench.impls.reference import (
    Reference,
    check_output,
    expected_output,
    reference_attention,
    reference_bytes,
)
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.cuda_timing import cuda_event_times_ms, l2_cache_bytes, sm_clock_mhz
from mhabench.measure.environment import environment
from mhabench.measure.memory import LiveStorageTracker, sdpa_backend
from mhabench.measure.peaks import match_datasheet, measured_peaks, mig_reason, sheet_peaks
from mhabench.measure.rounds import interleaved_medians_ms, time_in_rounds
from mhabench.measure.trackers import CudaMemoryTracker
from mhabench.pattern import CAUSAL, PLAIN, AttentionPattern
from mhabench.results.schema import RowStatus
from mhabench.scenario.config import TimingConfig
from mhabench.torch_errors import classify_failure, one_line

Verdict = tuple[bool | None, dict[str, Any]]  # (True PASS, False FAIL, None SKIP), figures for the line and JSON
BF16 = torch.bfloat16
# Unsupported rows that are facts about an implementation, not failures (capability and no-kernel reasons): codes.
ALLOWED_UNSUPPORTED = frozenset(
    code.value
    for code in (
        ReasonCode.NOT_INSTALLED,
        ReasonCode.GROUPED_KV,
        ReasonCode.DECODE,
        ReasonCode.SDPA_NO_KERNEL,
        ReasonCode.BACKWARD,
        ReasonCode.DEVICE,
    )
)
LINE_CHARS = 240


@dataclasses.dataclass(frozen=True)
class Context:
    device: torch.device
    out: Path
    configs: Path


def _median_ms(fn: Callable[[], object], device: torch.device, flush: bool = True) -> list[float]:
    """[device median, host median] in ms: event blocks and host calls in the same rounds, after a warm-up by time."""
    stats = time_in_rounds({"call": fn}, device, TimingConfig(flush_l2=flush), 0)["call"].latency
    return [stats.latency_ms, stats.host_latency_ms]


def check_datasheet(ctx: Context) -> Verdict:
    """The device's own name matches a table entry whose figures its measured peaks approach (50–105 %)."""
    name = torch.cuda.get_device_name(ctx.device)
    sheet = match_datasheet(name)
    mig = mig_reason(name, torch.cuda.get_device_properties(ctx.device).multi_processor_count, sheet)
    if sheet is None or mig is not None:
        return False, {"name": name, "problem": mig or "no datasheet entry: peaks would be measured"}
    measured = measured_peaks(ctx.device, BF16)
    tflops_share = measured.peak_tflops / sheet.tensor_tflops
    bandwidth_share = measured.peak_gbps / (sheet.memory_tbps * 1e3)
    fp32 = {f"tf32={tf32}": dataclasses.asdict(sheet_peaks(sheet, torch.float32, tf32)) for tf32 in (False, True)}
    figures = {
        "name": name,
        "model": sheet.model,
        "bf16_tflops_share": tflops_share,
        "copy_bandwidth_share": bandwidth_share,
        "measured": dataclasses.asdict(measured),
        "fp32_roofs": fp32,
    }
    return 0.5 <= tflops_share <= 1.05 and 0.5 <= bandwidth_share <= 1.05, figures


def check_event_vs_host(ctx: Context) -> Verdict:
    """A GPU-bound matmul, event and host samples from the same rounds: host/device in [0.98, 1.10] (and on cuda:1)."""
    a, b = (torch.randn(8192, 8192, device=ctx.device, dtype=BF16) for _ in range(2))
    figures = dict(zip(("device_ms", "host_ms"), _median_ms(lambda: a @ b, ctx.device, flush=False), strict=True))
    if torch.cuda.device_count() > 1:  # cuda:1 must be synchronized and timed on its own device
        other = torch.device("cuda", 1)
        c, d = a.to(other), b.to(other)
        figures["cuda1_device_ms"], figures["cuda1_host_ms"] = _median_ms(lambda: c @ d, other, flush=False)
    figures |= {"host_over_device": figures["host_ms"] / figures["device_ms"], "sm_clock_mhz": sm_clock_mhz(ctx.device)}
    return 0.98 <= figures["host_over_device"] <= 1.10, figures


def check_l2_effect(ctx: Context) -> Verdict:
    """A quarter-of-L2 re-read, warm (spin lead) and flushed arms in the same rounds: warm faster, flushed ≤ HBM."""
    x = torch.randn(l2_cache_bytes(ctx.device) // 16, device=ctx.device)
    arms = time_in_rounds(
        {"warm": x.sum, "flushed": x.sum},
        ctx.device,
        TimingConfig(min_run_time_s=0.05),
        0,
        flush_l2={"warm": False, "flushed": True},
    )
    warm_ms, cold_ms = (arms[arm].latency.latency_ms for arm in ("warm", "flushed"))
    sheet = match_datasheet(torch.cuda.get_device_name(ctx.device))
    figures = {
        "bytes": x.nbytes,
        "warm_us": warm_ms * 1e3,
        "flushed_us": cold_ms * 1e3,
        "warm_gbps": x.nbytes / warm_ms / 1e6,
        "flushed_gbps": x.nbytes / cold_ms / 1e6,
        "hbm_gbps": sheet.memory_tbps * 1e3 if sheet else math.inf,
    }
    return warm_ms < 0.9 * cold_ms and figures["flushed_gbps"] <= figures["hbm_gbps"], figures


def check_peak_memory(ctx: Context) -> Verdict:
    """``torch.empty(N)`` peaks at exactly N·4 bytes rounded up to 512; fused/naive at 50–100 % of predicted."""
    figures: dict[str, Any] = {}
    torch.cuda.empty_cache()
    for elements in (1000, 16 * 2**20 + 1):  # 4000 B (small pool) and 64 MiB + 4 B (a large block, split)
        with CudaMemoryTracker(ctx.device) as tracker:
            kept = torch.empty(elements, device=ctx.device)
        figures[f"empty_{elements}"] = [tracker.result().peak_memory_bytes, math.ceil(kept.nbytes / 512) * 512]
    weights = AttentionWeights.random(4096, dtype=BF16, device=ctx.device)
    x = torch.randn(1, 4096, 4096, device=ctx.device, dtype=BF16)
    for name, model in (("fused", cost.FUSED), ("naive", cost.MATERIALIZED)):
        module = build(name, weights, 32, PLAIN)
        with torch.inference_mode():
            module(x)  # cuBLAS workspaces and lazy state exist before the measured call
            with CudaMemoryTracker(ctx.device) as tracker:
                module(x)
        predicted = model(Workload(1, 4096, 4096, 4096, 32, 32, 128, 2)).predicted_peak_bytes
        figures[f"{name}_vs_predicted"] = [tracker.result().peak_memory_bytes, predicted]
    exact = all(peak == want for key, (peak, want) in figures.items() if key.startswith("empty"))
    bounded = all(0.5 * want <= peak <= want for key, (peak, want) in figures.items() if key.endswith("predicted"))
    return exact and bounded, figures


def _backend_of(name: str, weights: AttentionWeights, x: torch.Tensor, heads: int) -> list[Any]:
    """[SDPA backend that ran (or 'unsupported: …'), output within tolerance of the float64 reference]."""
    tracker = LiveStorageTracker()
    try:
        with torch.no_grad(), tracker:
            out = build(name, weights, heads, CAUSAL)(x)
    except UnsupportedError as exc:
        return [f"unsupported: {exc}", True]
    dtype = str(x.dtype).removeprefix("torch.")
    return [sdpa_backend(tracker.ops), check_output(out, reference_attention(weights, x, heads, CAUSAL), dtype).ok]


def check_sdpa_backends(ctx: Context) -> Verdict:
    """bf16 d_k 128: each forced backend is the one the dispatched ops show; fused picks a fused one; fp32 no flash."""
    weights = AttentionWeights.random(1024, dtype=BF16, device=ctx.device)
    x = torch.randn(1, 512, 1024, device=ctx.device, dtype=BF16)
    expected = {
        "fused": ("flash", "cudnn", "efficient"),
        "sdpa_flash": ("flash",),
        "sdpa_efficient": ("efficient",),
        "sdpa_math": ("math",),
        "sdpa_cudnn": ("cudnn", "unsupported"),
    }
    seen = {name: _backend_of(name, weights, x, 8) for name in expected}
    fp32 = _backend_of("fused", weights.to(dtype=torch.float32), x.float(), 8)
    right = all(ok and backend.startswith(expected[name]) for name, (backend, ok) in seen.items())
    return right and fp32[1] and "flash" not in fp32[0], {**seen, "fused_fp32": fp32}


def check_no_kernel_unsupported(ctx: Context) -> Verdict:
    """Flash forced with fp32, or with head_dim 512, raises UnsupportedError (an ``unsupported`` row), not an error."""
    weights = AttentionWeights.random(1024, device=ctx.device)
    x = torch.randn(1, 128, 1024, device=ctx.device)
    figures = {
        "fp32": _backend_of("sdpa_flash", weights, x, 8)[0],
        "head_dim_512": _backend_of("sdpa_flash", weights.to(dtype=BF16), x.to(BF16), 2)[0],
    }
    return all(backend.startswith("unsupported") for backend in figures.values()), figures


def _run_cli(ctx: Context, config: Path, timeout_s: int, *extra: str) -> list[dict[str, str]]:
    """``python3 -m mhabench run CONFIG --out OUT/<stem>``; the rows of the results.csv it wrote."""
    out = ctx.out / config.stem
    command = [sys.executable, "-m", "mhabench", "run", str(config), "--out", str(out), *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    runs = sorted(out.glob("*/results.csv"), key=lambda path: path.stat().st_mtime)
    if not runs:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"mhabench run {config} exited {done.returncode} without results.csv: {tail[0]}")
    with runs[-1].open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _expected(row: dict[str, str]) -> bool:
    """ok, or unsupported for a reason that is a fact about the implementation."""
    reason_allowed = row.get("reason_code", "") in ALLOWED_UNSUPPORTED
    return row["status"] == RowStatus.OK or (row["status"] == RowStatus.UNSUPPORTED and reason_allowed)


def _status_counts(rows: list[dict[str, str]]) -> dict[str, Any]:
    unexpected = [f"{r['case_id']} {r['impl']}: {r['status']} {r['error'][:80]}" for r in rows if not _expected(r)]
    counts = {status: sum(r["status"] == status for r in rows) for status in sorted({r["status"] for r in rows})}
    return {"rows": len(rows), **counts, "unexpected": unexpected}


def check_end_to_end(ctx: Context) -> Verdict:
    """configs/gpu-e2e.yaml through the CLI: 192 rows, each ok or unsupported for a capability reason."""
    figures = _status_counts(_run_cli(ctx, ctx.configs / "gpu-e2e.yaml", 400))
    return figures["rows"] == 24 * 8 and not figures["unexpected"], figures


def check_compiled_flex(ctx: Context) -> Verdict:
    """configs/gpu-compiled.yaml through the CLI: compiled and flex both ok, with their compile time."""
    rows = _run_cli(ctx, ctx.configs / "gpu-compiled.yaml", 400)
    figures = {**_status_counts(rows), "compile_time_s": {r["impl"]: r.get("compile_time_s") for r in rows}}
    return [r["status"] for r in rows] == [RowStatus.OK, RowStatus.OK], figures


def _oom_config(ctx: Context) -> Path:
    """naive at a length whose bf16 scores need 1.5× the free memory, then a small case."""
    free = torch.cuda.mem_get_info(ctx.device)[0]
    seq_len = math.ceil(math.sqrt(1.5 * free / (32 * 2)) / 1024) * 1024
    scenarios = [
        {"name": "huge", "seq_len": seq_len, "d_model": 1024, "heads": 32},
        {"name": "small", "seq_len": 512, "d_model": 512, "heads": 8},
    ]
    timing = {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 5}
    config = {
        "name": "gpu-oom",
        "device": str(ctx.device),
        "dtype": "bfloat16",
        "implementations": ["naive"],
        "timing": timing,
        "scenarios": scenarios,
    }
    path = ctx.out / "gpu-oom.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def check_oom_then_runs(ctx: Context) -> Verdict:
    """An allocation beyond the device is ``oom``; through the CLI an oversized case (oom, or skipped by a memory
    guard) is followed by a case that runs."""
    try:
        torch.empty(torch.cuda.mem_get_info(ctx.device)[1] * 2, dtype=torch.uint8, device=ctx.device)
        in_process = ["error", "allocating twice the device's memory succeeded"]
    except Exception as exc:
        in_process = list(classify_failure(exc))
    torch.cuda.empty_cache()
    help_run = [sys.executable, "-m", "mhabench", "run", "--help"]
    help_text = subprocess.run(help_run, capture_output=True, text=True, timeout=60, check=False).stdout
    extra = ["--no-memory-guard"] if "--no-memory-guard" in help_text else []
    statuses = [row["status"] for row in _run_cli(ctx, _oom_config(ctx), 300, *extra)]
    figures = {"in_process": in_process, "cli_statuses": statuses, "cli_flags": extra}
    first_ok = statuses[:1] == [RowStatus.OOM] or (not extra and statuses[:1] == [RowStatus.SKIPPED])
    return in_process[0] == RowStatus.OOM and first_ok and statuses[1:] == [RowStatus.OK], figures


STICKY_PROGRAM = """import torch; from mhabench.torch_errors import classify_failure, is_sticky_cuda_error
try:
    x = torch.zeros(4, device="{device}"); x[torch.tensor([99], device=x.device)] = 1; torch.cuda.synchronize()
except Exception as exc:
    print(is_sticky_cuda_error(exc), classify_failure(exc)[0], "|", str(exc).strip().splitlines()[0])
"""


def check_sticky_error(ctx: Context) -> Verdict:
    """A device-side assert (in a child process: it poisons the context) is sticky and classified ``error``."""
    program = STICKY_PROGRAM.format(device=ctx.device)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False)
    line = (done.stdout.strip().splitlines() or ["(no output) " + done.stderr.strip()[-200:]])[-1]
    return line.startswith("True error"), {"child": line}


def check_reference_cost(ctx: Context) -> Verdict:
    """b=8, h=32, n=8192, d_model=4096: the float64 check runs in seconds within its predicted device memory,
    host RAM stays flat, and fused passes it."""
    weights = AttentionWeights.random(4096, dtype=BF16, device=ctx.device)
    x = torch.randn(8, 8192, 4096, device=ctx.device, dtype=BF16)
    rss_before_kib, start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    with CudaMemoryTracker(ctx.device) as tracker:
        reference = expected_output(weights, x, 32, CAUSAL)
    seconds = time.perf_counter() - start
    with torch.inference_mode():
        check = check_output(build("fused", weights, 32, CAUSAL)(x), reference, "bfloat16")
    figures = {
        "seconds": seconds,
        "device_peak_bytes": tracker.result().peak_memory_bytes,
        "predicted_bytes": reference_bytes(Workload(8, 8192, 8192, 4096, 32, 32, 128, 2, CAUSAL)),
        "host_growth_bytes": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before_kib) * 1024,
        "sampled_rows": 0 if reference.rows is None else len(reference.rows.row_index),
        "fused": dataclasses.asdict(check),
    }
    within = figures["device_peak_bytes"] <= 1.1 * figures["predicted_bytes"] and figures["host_growth_bytes"] < 2**31
    return seconds < 30 and within and check.ok, figures


def _throughput(ctx: Context, weights: AttentionWeights, seq_len: int, pattern: AttentionPattern) -> dict[str, float]:
    """Layer and attention-kernel TFLOP/s on useful FLOPs (causal: visible pairs only) and executed FLOPs."""
    x = torch.randn(1, seq_len, 4096, device=ctx.device, dtype=BF16)
    q, k, v = (torch.randn(1, 32, seq_len, 128, device=ctx.device, dtype=BF16) for _ in range(3))
    module = build("fused", weights, 32, pattern)
    with torch.inference_mode():
        layer_ms = _median_ms(lambda: module(x), ctx.device)[0]
        kernel_ms = _median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=pattern.causal), ctx.device)[0]
    layer = cost.FUSED(Workload(1, seq_len, seq_len, 4096, 32, 32, 128, 2, pattern))
    return {
        "layer_ms": layer_ms,
        "layer_useful_tflops": layer.useful_flops / layer_ms / 1e9,
        "layer_executed_tflops": layer.flops / layer_ms / 1e9,
        "kernel_ms": kernel_ms,
        "kernel_useful_tflops": (layer.useful_flops - layer.proj_flops) / kernel_ms / 1e9,
    }


def check_fused_throughput(ctx: Context) -> Verdict:
    """fused bf16 d_k 128, n 4k–16k: throughput on useful FLOPs never above the datasheet peak (target ≥ 550)."""
    weights = AttentionWeights.random(4096, dtype=BF16, device=ctx.device)
    runs = {
        f"n{n}{'_causal' if pattern.causal else ''}": _throughput(ctx, weights, n, pattern)
        for n in (4096, 8192, 16384)
        for pattern in (PLAIN, CAUSAL)
    }
    backend = _backend_of("fused", weights, torch.randn(1, 256, 4096, device=ctx.device, dtype=BF16), 32)[0]
    sheet = match_datasheet(torch.cuda.get_device_name(ctx.device))
    peak = sheet.tensor_tflops if sheet else math.inf
    layer = {key: round(run["layer_useful_tflops"]) for key, run in runs.items()}
    rates = [value for run in runs.values() for key, value in run.items() if key.endswith("useful_tflops")]
    figures = {
        "layer_useful_tflops": layer,
        "peak_tflops": peak,
        "backend": backend,
        "skips_masked_work": kernel_skips_masked_work(backend, "fused"),
        "runs": runs,
    }
    return max(rates) <= peak, figures


FP8_SEQ_LEN = 8192


def error_distribution(output: torch.Tensor, reference: Reference) -> dict[str, float]:
    """|out − ref| / max |ref| over the compared elements: its median, 99th percentile, maximum and RMS (the check
    reads the maximum; the rest says whether it is a tail or the bulk)."""
    compared = reference.compared(output.detach()).to(dtype=torch.float64, device=reference.values.device)
    relative = ((compared - reference.values).abs() / reference.values.abs().max()).flatten()
    sample = relative[torch.randperm(relative.numel(), device=relative.device)[: 2**24]]  # quantile's size limit
    quantiles = torch.quantile(sample, torch.tensor([0.5, 0.99], dtype=torch.float64, device=sample.device))
    return {
        "median": quantiles[0].item(),
        "p99": quantiles[1].item(),
        "max": relative.max().item(),
        "rms": relative.pow(2).mean().sqrt().item(),
    }


def _fp8_against_bf16(
    ctx: Context, weights: AttentionWeights, x: torch.Tensor, pattern: AttentionPattern
) -> dict[str, Any]:
    """fused_fp8 checked against the float64 reference under its tolerance, then timed with bf16 fused in the same
    rounds: the error beside the speed."""
    reference = expected_output(weights, x, 32, pattern)
    fp8, fused = build("fused_fp8", weights, 32, pattern), build("fused", weights, 32, pattern)
    with torch.inference_mode():
        output = fp8(x)
        check, errors = check_output(output, reference, "float8_e4m3fn"), error_distribution(output, reference)
        timed = time_in_rounds({"fused": lambda: fused(x), "fused_fp8": lambda: fp8(x)}, ctx.device, TimingConfig(), 0)
    fused_ms, fp8_ms = (timed[name].latency.latency_ms for name in ("fused", "fused_fp8"))
    useful = cost.FUSED_FP8(Workload(1, x.shape[1], x.shape[1], 4096, 32, 32, 128, 2, pattern)).useful_flops
    return {
        "ok": check.ok,
        "reason": check.reason,
        "max_rel_err": check.max_rel_err,
        "tolerance": FP8_TOLERANCE,
        "error": errors,
        "fused_ms": fused_ms,
        "fused_fp8_ms": fp8_ms,
        "speedup": fused_ms / fp8_ms,
        "fused_useful_tflops": useful / fused_ms / 1e9,
        "fused_fp8_useful_tflops": useful / fp8_ms / 1e9,
    }


def check_fp8_attention(ctx: Context) -> Verdict:
    """fused_fp8 (b=1, n=8192, d_model=4096, 32 heads, causal and not) passes its fp8 check against the float64
    reference and beats bf16 fused in the same rounds (SKIP: below sm90 or no nvidia-cudnn-frontend)."""
    weights = AttentionWeights.random(4096, dtype=BF16, device=ctx.device)
    try:
        build("fused_fp8", weights, 32, PLAIN)
    except UnsupportedError as exc:
        return None, {"reason": str(exc)}
    x = torch.randn(1, FP8_SEQ_LEN, 4096, device=ctx.device, dtype=BF16)
    runs = {("causal" if p.causal else "full"): _fp8_against_bf16(ctx, weights, x, p) for p in (PLAIN, CAUSAL)}
    sheet = match_datasheet(torch.cuda.get_device_name(ctx.device))
    figures = {
        "speedup": {name: run["speedup"] for name, run in runs.items()},
        "max_rel_err": {name: run["max_rel_err"] for name, run in runs.items()},
        "tolerance": FP8_TOLERANCE,
        "fp8_peak_tflops": sheet.fp8_tflops if sheet else None,
        "runs": runs,
    }
    return all(run["ok"] and run["speedup"] > 1 for run in runs.values()), figures


def check_do_bench(ctx: Context) -> Verdict:
    """Flushed per-call medians, ours and ``triton.testing.do_bench``'s, from 5 alternating runs each: within 5 %."""
    try:
        from triton.testing import do_bench
    except ImportError:
        return None, {"reason": "triton is not importable"}
    module = build("fused", AttentionWeights.random(4096, dtype=BF16, device=ctx.device), 32, CAUSAL)
    x = torch.randn(1, 8192, 4096, device=ctx.device, dtype=BF16)
    with torch.inference_mode():
        medians = interleaved_medians_ms(
            {
                "ours_ms": lambda: _median_ms(lambda: module(x), ctx.device)[0],
                "do_bench_ms": lambda: do_bench(lambda: module(x), 25, 100, return_mode="median"),
            },
            5,
        )
    ratio = medians["ours_ms"] / medians["do_bench_ms"]
    return abs(ratio - 1) <= 0.05, {**medians, "ratio": ratio, "sm_clock_mhz": sm_clock_mhz(ctx.device)}


def check_cuda_graphs(ctx: Context) -> Verdict:
    """A small launch-bound naive call: graph replay costs no more device time and less host time than eager."""
    module = build("naive", AttentionWeights.random(512, dtype=BF16, device=ctx.device), 8, CAUSAL)
    x = torch.randn(1, 256, 512, device=ctx.device, dtype=BF16)
    with torch.inference_mode():
        eager = cuda_event_times_ms(lambda: module(x), ctx.device, 50, flush_l2=True, cuda_graphs=False)
        graph = cuda_event_times_ms(lambda: module(x), ctx.device, 50, flush_l2=True, cuda_graphs=True)
    figures = {
        "eager_us": eager.median_device_ms * 1e3,
        "eager_host_us": eager.median_host_ms * 1e3,
        "graph_us": graph.median_device_ms * 1e3,
        "graph_host_us": graph.median_host_ms * 1e3,
    }
    ok = figures["graph_us"] <= 1.1 * figures["eager_us"] and figures["graph_host_us"] < figures["eager_host_us"]
    return ok, figures


def check_pytest_cuda(ctx: Context) -> Verdict:
    """``pytest -m cuda`` passes (its output goes to OUT/pytest_cuda.txt)."""
    if not Path("tests").is_dir():
        return None, {"reason": "no tests/ folder here (run from the repository root)"}
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider", "tests"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    (ctx.out / "pytest_cuda.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    return done.returncode == 0, {"summary": (done.stdout.strip().splitlines() or ["no output"])[-1]}


def check_dram_copy(ctx: Context) -> Verdict:
    """A 1 GiB copy kernel under ncu: DRAM read + written within 5 % of 2 × its size (SKIP: no ncu or permission)."""
    return counter_checks.copy_check(ctx.device)


def check_tensor_flops(ctx: Context) -> Verdict:
    """A 4096³ bf16 GEMM under ncu: tensor-core FLOPs = 2·m·n·k (SKIP: no ncu or permission)."""
    return counter_checks.gemm_check(ctx.device)


def check_fused_hardware_flops(ctx: Context) -> Verdict:
    """The fused layer (b=1, n=4096, d=4096, 32 heads, bf16, non-causal) through the runner's ncu path: tensor-core
    FLOPs = the model's useful FLOPs (SKIP: no ncu or permission)."""
    return counter_checks.fused_check(ctx.device)


def check_energy(ctx: Context) -> Verdict:
    """bf16 8192³ matmuls over a ≥ 5 s NVML energy window: between half the power limit and the limit × 1.02
    (SKIP: no nvidia-ml-py)."""
    return counter_checks.energy_check(ctx.device)


# Every check_* function defined above (not imported), in order: name → check.
CHECKS: dict[str, Callable[[Context], Verdict]] = {
    name.removeprefix("check_"): check
    for name, check in list(globals().items())
    if name.startswith("check_") and check.__module__ == __name__
}


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_short(item)}" for key, item in value.items()) + "}"
    return str(value)


def summary(figures: dict[str, Any]) -> str:
    """The figures as one readable line (4 significant digits); dicts of dicts are left to the JSON."""
    flat = {
        key: value
        for key, value in figures.items()
        if not (isinstance(value, dict) and any(isinstance(item, dict) for item in value.values()))
    }
    line = ", ".join(f"{key}={_short(value)}" for key, value in flat.items())
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def run_check(name: str, check: Callable[[Context], Verdict], ctx: Context) -> dict[str, Any]:
    """Run one check and print its line; an exception is a FAIL with its one-line reason, never a traceback."""
    start = time.perf_counter()
    try:
        passed, figures = check(ctx)
    except Exception as exc:
        passed, figures = False, {"exception": one_line(exc)}
    finally:
        torch.cuda.empty_cache()
    status = {True: "PASS", False: "FAIL", None: "SKIP"}[passed]
    seconds = time.perf_counter() - start
    print(f"{status} {name}: {summary(figures)} [{seconds:.1f} s]", flush=True)
    return {"name": name, "status": status, "asserts": (check.__doc__ or "").strip(), "seconds": seconds, **figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m mhabench.checks.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-check"), help="folder for gpu_check.json")
    parser.add_argument("--configs", type=Path, default=Path("configs"), help="folder with gpu-e2e.yaml etc.")
    parser.add_argument("--skip", nargs="*", default=[], choices=sorted(CHECKS), help="checks to leave out")
    parser.add_argument("--only", nargs="*", default=None, choices=sorted(CHECKS), help="run only these checks")
    args = parser.parse_args(argv)
    chosen = [name for name in CHECKS if name not in args.skip and (args.only is None or name in args.only)]
    args.out.mkdir(parents=True, exist_ok=True)
    if torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
        context = Context(device, args.out, args.configs)
        checks = [run_check(name, CHECKS[name], context) for name in chosen]
    else:
        device, reason = torch.device("cpu"), f"no CUDA device (torch {torch.__version__}, CUDA {torch.version.cuda})"
        checks = [{"name": name, "status": "SKIP", "reason": reason} for name in chosen]
        print("\n".join(f"SKIP {name}: {reason}" for name in chosen), flush=True)
    command = [sys.executable, "-m", "mhabench.checks.gpu", *(sys.argv[1:] if argv is None else argv)]
    report = {"command": command, "environment": environment(device), "checks": checks}
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=2, default=str), encoding="utf-8")
    failed = [check["name"] for check in checks if check["status"] == "FAIL"]
    print(f"{len(failed)} of {len(checks)} checks failed {failed}; figures in {args.out / 'gpu_check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
