"""The runner end to end on tiny configs: files on disk, per-row failures, incremental writing."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import logging
import math
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import CORE_IMPLEMENTATIONS, FIXED_PEAKS
from plain_cases import plain_case

from mhabench.analysis.speedup import speedup_rows
from mhabench.errors import UnsupportedError
from mhabench.impls.reference import TOLERANCE, reference_attention
from mhabench.measure.peaks import DevicePeaks
from mhabench.pattern import AttentionPattern
from mhabench.results.columns import COLUMNS
from mhabench.results.gpu_groups import Energy
from mhabench.results.schema import CaseIdentity, Outcome, ResultRow
from mhabench.results.store import load_run, rows_frame
from mhabench.run import case as case_runner
from mhabench.run import memory_guard, runner
from mhabench.run.request import RunRequest
from mhabench.scenario.config import RunConfig, TimingConfig
from mhabench.scenario.loading import parse_config


def tiny(data: dict[str, Any], **changes: Any) -> RunConfig:
    return parse_config({**data, **changes}, "tiny.yaml")


def csv_rows(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "results.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class RecordingProgress:
    def __init__(self) -> None:
        self.total: int | None = None
        self.labels: list[str] = []

    def start(self, total: int) -> None:
        self.total = total

    def advance(self, label: str) -> None:
        self.labels.append(label)


def test_tiny_run_end_to_end_with_real_peak_measurement(tiny_config_data: dict[str, Any], tmp_path: Path) -> None:
    """The one runner test that measures the CPU's roofline peaks for real (~1-2 s)."""
    progress = RecordingProgress()
    result = runner.run(tiny(tiny_config_data), tmp_path, progress, RunRequest(argv=("mhabench", "run", "tiny.yaml")))

    assert result.run_dir.parent == tmp_path
    assert re.fullmatch(r"\d{8}T\d{6}Z-tiny", result.run_dir.name)
    assert {p.name for p in result.run_dir.iterdir()} == {"results.csv", "results.parquet", "manifest.json"}
    assert progress.total == len(CORE_IMPLEMENTATIONS)
    assert len(progress.labels) == len(CORE_IMPLEMENTATIONS)

    manifest = json.loads((result.run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete"
    assert manifest["run_id"] == result.run_dir.name
    assert manifest["command"] == ["mhabench", "run", "tiny.yaml"]
    assert manifest["finished_at"] >= manifest["started_at"]
    assert manifest["implementations"] == list(CORE_IMPLEMENTATIONS)
    env = manifest["environment"]
    assert env["torch"] == torch.__version__
    assert env["device"] == "cpu"
    assert env["threads"] == torch.get_num_threads()
    assert {"python", "mhabench_version", "git_commit", "cpu_model", "cuda"} <= set(env)
    roofline = manifest["roofline"]["float32"]
    assert roofline["source"] == "measured"
    assert roofline["peak_tflops"] > 0 and roofline["peak_gbps"] > 0
    assert RunConfig.model_validate(manifest["config"]) == tiny(tiny_config_data)

    with open(result.run_dir / "results.csv", newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == COLUMNS
    on_disk = csv_rows(result.run_dir)
    assert [row["impl"] for row in on_disk] == list(CORE_IMPLEMENTATIONS)
    assert {row["status"] for row in on_disk} == {"ok"}

    frame = pd.read_parquet(result.run_dir / "results.parquet")
    assert list(frame.columns) == [*COLUMNS, "times_ms"]
    for row in frame.to_dict("records"):
        assert row["status"] == "ok" and row["error"] == ""
        assert row["case_id"] == "t/b2-n9-d16-h2-float32-causal-bias"
        assert len(row["times_ms"]) == row["samples"] >= 1
        assert row["latency_ms"] == pytest.approx(float(pd.Series(list(row["times_ms"])).median()))
        assert row["latency_p25_ms"] <= row["latency_ms"] <= row["latency_p75_ms"]
        assert row["max_rel_err"] < TOLERANCE["float32"]
        assert row["tokens_per_s"] == pytest.approx(2 * 9 / (row["latency_ms"] / 1e3))
        assert row["peak_memory_bytes"] > 0
        opaque = row["impl"] == "torch_mha"  # with bias, nn.MultiheadAttention's fast path is one fused op
        assert row["memory_method"] == (
            "dispatch_storage_tracker (outputs only inside _native_multi_head_attention)"
            if opaque
            else "dispatch_storage_tracker"
        )
        assert row["roofline_source"] == "measured"
        assert row["arithmetic_intensity"] == pytest.approx(row["flops"] / row["bytes_moved"])
        assert row["roofline_bound"] in {"memory", "compute"}
        judged = row["achieved_useful_tflops"] if row["skips_masked_work"] else row["achieved_tflops"]
        assert row["roofline_efficiency"] == pytest.approx(judged / row["attainable_tflops"])
    assert frame["rounds_id"].notna().all() and frame["rounds_id"].nunique() == 1  # one case: one set of rounds
    assert frame.set_index("impl")["skips_masked_work"].to_dict() == {
        "naive": False,
        "per_head": False,
        "fused": True,
        "torch_mha": False,
    }  # causal: fused's flash kernel skips masked blocks; torch_mha passes a dense mask, computed in full
    backends = dict(zip(frame["impl"], frame["sdpa_backend"], strict=True))
    assert backends["naive"] == backends["per_head"] == ""
    assert backends["fused"] == "flash"
    pd.testing.assert_frame_equal(result.frame.drop(columns="times_ms"), frame.drop(columns="times_ms"))
    assert_same_rows(result.rows, load_run(result.run_dir).rows)


def missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def assert_same_rows(returned: list[ResultRow], loaded: list[ResultRow]) -> None:
    """The typed rows ``run`` returns are the rows read back from disk (NaN and None both mean "none")."""
    assert len(returned) == len(loaded)
    for a, b in zip(returned, loaded, strict=True):
        for (name, x), y in zip(a.record().items(), b.record().values(), strict=True):
            assert (missing(x) and missing(y)) or x == y, (a.case.impl, name, x, y)


def test_every_case_and_implementation_gets_a_row(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks
) -> None:
    scenario = {"name": "s", "seq_len": [4, 5], "d_model": 8, "heads": [1, 2]}
    config = tiny(tiny_config_data, scenarios=[scenario], implementations=["fused", "naive"])
    rows = runner.run(config, tmp_path).frame
    assert len(rows) == 2 * 2 * 2
    assert list(rows["impl"]) == ["fused", "naive"] * 4
    assert list(zip(rows["seq_len"], rows["heads"], strict=True))[::2] == [(4, 1), (4, 2), (5, 1), (5, 2)]
    assert set(rows["status"]) == {"ok"}
    assert set(rows["roofline_source"]) == {fixed_peaks.source}


def test_raising_implementation_becomes_an_error_row(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, temp_impl: Any
) -> None:
    def explode(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("kernel exploded\nsecond line of detail")

    broken = temp_impl(explode)
    config = tiny(tiny_config_data, implementations=["naive", broken, "fused"])
    result = runner.run(config, tmp_path)

    # a failure is on disk at once; the ok rows follow the case's shared timing rounds
    on_disk = {row["impl"]: row for row in csv_rows(result.run_dir)}
    assert {impl: row["status"] for impl, row in on_disk.items()} == {"naive": "ok", broken: "error", "fused": "ok"}
    assert on_disk[broken]["error"] == "RuntimeError: kernel exploded"
    assert on_disk[broken]["latency_ms"] == ""
    assert float(on_disk["naive"]["latency_ms"]) > 0 and float(on_disk["fused"]["latency_ms"]) > 0
    loaded = load_run(result.run_dir)
    assert list(loaded.frame["status"]) == ["error", "ok", "ok"]
    assert loaded.manifest.status == "complete"


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
        RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: 1 TB"),
        MemoryError(),
    ],
    ids=["torch-oom", "cpu-allocator", "memory-error"],
)
def test_out_of_memory_becomes_an_oom_row(
    exc: BaseException, tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, temp_impl: Any
) -> None:
    def no_memory(x: torch.Tensor) -> torch.Tensor:
        raise exc

    greedy = temp_impl(no_memory)
    rows = runner.run(tiny(tiny_config_data, implementations=[greedy, "fused"]), tmp_path).frame
    assert list(rows["status"]) == ["oom", "ok"]
    assert rows["error"][0].startswith(type(exc).__name__)
    assert "\n" not in rows["error"][0]


def test_wrong_output_becomes_a_mismatch_row(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, temp_impl: Any
) -> None:
    identity = temp_impl(lambda x: x.clone())
    rows = runner.run(tiny(tiny_config_data, implementations=[identity, "naive"]), tmp_path).frame
    mismatch = rows.iloc[0]
    assert mismatch["status"] == "mismatch"
    assert mismatch["error"].startswith("max_rel_err ")
    assert mismatch["max_rel_err"] > TOLERANCE["float32"]
    assert pd.isna(mismatch["latency_ms"])  # a wrong implementation is never timed
    assert rows.iloc[1]["status"] == "ok"


def test_implementation_with_its_own_reference_is_checked_against_it(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, temp_impl: Any
) -> None:
    def doubled_reference(weights: Any, x: torch.Tensor, heads: int, pattern: AttentionPattern) -> torch.Tensor:
        return 2 * reference_attention(weights, x, heads, pattern)

    doubled = temp_impl(lambda x: 2 * x, reference=doubled_reference)  # wrong on purpose: x, not attention
    right = temp_impl(lambda x: x, reference=lambda weights, x, heads, pattern: x.double())
    rows = runner.run(tiny(tiny_config_data, implementations=[doubled, right]), tmp_path).frame
    assert list(rows["status"]) == ["mismatch", "ok"]


def test_a_very_slow_implementation_leaves_the_fast_ones_their_samples(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, temp_impl: Any
) -> None:
    """A 40 ms call spends the 50 ms cap in two rounds and leaves them; naive and fused go on to min_samples with a
    noisy flag and an interval. Under the old rule its cap ended every implementation's timing at two samples."""

    def sleepy(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.04)
        return x

    slow = temp_impl(sleepy, reference=lambda weights, x, heads, pattern: x.double())
    timing = {**tiny_config_data["timing"], "min_samples": 6}
    frame = runner.run(tiny(tiny_config_data, implementations=["naive", slow, "fused"], timing=timing), tmp_path).frame
    rows = frame.set_index("impl")
    # it left in the round whose sample spent its 50 ms cap (two 40 ms sleeps on an idle machine; one where the
    # machine is busy enough to stretch a sleep past 50 ms): read from its own samples, not this machine's speed
    times_ms, cap_ms = list(rows.loc[slow, "times_ms"]), timing["max_run_time_s"] * 1e3
    assert sum(times_ms[:-1]) < cap_ms <= sum(times_ms) and len(times_ms) == rows.loc[slow, "samples"] < 6
    # naive and fused go on to min_samples (an idle machine: always), or leave by their own cap, never by the slow
    # one's: a machine loaded enough to stretch a 2 ms block past 50 ms caps them after fewer samples
    for name in ("naive", "fused"):
        spent_ms = sum(rows.loc[name, "times_ms"]) * rows.loc[name, "calls_per_sample"]
        assert rows.loc[name, "samples"] >= 6 or spent_ms >= cap_ms
        assert rows.loc[name, "capped"] == (rows.loc[name, "samples"] < 6)
    assert rows.loc[slow, "capped"] and rows["rounds_id"].nunique() == 1
    assert pd.isna(rows.loc[slow, "noisy"])
    speedups = speedup_rows(frame, "naive").set_index("impl")
    assert speedups.loc["fused", "speedup_method"] == "paired"
    if min(rows.loc["naive", "samples"], rows.loc["fused", "samples"]) >= 6:
        assert rows.loc["fused", "noisy"] in (True, False) and math.isfinite(speedups.loc["fused", "speedup_ci_low"])
    assert math.isnan(speedups.loc[slow, "speedup_ci_low"])  # fewer than 3 paired rounds: no interval


def test_interrupted_run_keeps_finished_rows(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks
) -> None:
    class StopAfterFirstRow(RecordingProgress):
        def advance(self, label: str) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runner.run(tiny(tiny_config_data), tmp_path, progress=StopAfterFirstRow())
    (run_dir,) = tmp_path.iterdir()
    assert [row["impl"] for row in csv_rows(run_dir)] == ["naive"]
    loaded = load_run(run_dir)
    assert list(loaded.frame["impl"]) == ["naive"]
    assert loaded.manifest.status == "interrupted"
    assert loaded.manifest.finished_at is not None


def test_plan_predicts_without_building_or_running(
    tiny_config_data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("--dry-run must not build inputs or modules")

    monkeypatch.setattr(case_runner, "make_inputs", never)
    monkeypatch.setattr(case_runner, "prepare", never)
    rows = runner.plan(tiny(tiny_config_data))
    assert [r.case.impl for r in rows] == list(CORE_IMPLEMENTATIONS)
    assert {(r.status, r.case.run_id) for r in rows} == {("planned", "dry-run")}
    for r in rows:
        assert r.cost is not None and r.cost.flops > 0 and r.cost.predicted_peak_bytes > 0
        assert (r.correctness, r.latency, r.memory, r.roofline) == (None, None, None, None)
    frame = rows_frame(rows)
    assert frame["latency_ms"].isna().all() and (frame["flops"] > 0).all()


def test_a_case_outside_the_capabilities_is_an_unsupported_row(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch_mha cannot group K/V heads: the runner writes the reason without building it; the others run."""
    built: list[str] = []
    real_prepare = case_runner.prepare
    monkeypatch.setattr(case_runner, "prepare", lambda spec, *a: built.append(spec.name) or real_prepare(spec, *a))
    scenario = {"name": "gqa", "batch": 1, "seq_len": 6, "d_model": 16, "heads": 4, "kv_heads": 2}
    config = tiny(tiny_config_data, scenarios=[scenario], implementations=["torch_mha", "fused"])
    result = runner.run(config, tmp_path)
    unsupported, fused = result.rows
    assert unsupported.status == "unsupported"
    assert unsupported.outcome.error == "torch_mha: no grouped K/V heads (kv_heads 2 < heads 4)"
    assert (unsupported.correctness, unsupported.latency, unsupported.cost) == (None, None, None)
    assert (unsupported.case.kv_heads, unsupported.case.heads) == (2, 4)
    assert fused.status == "ok" and built == ["fused"]
    assert [r["status"] for r in csv_rows(result.run_dir)] == ["unsupported", "ok"]


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (ValueError("first\nsecond"), Outcome("error", "ValueError: first")),
        (
            torch.OutOfMemoryError("CUDA out of memory. Tried"),
            Outcome("oom", "OutOfMemoryError: CUDA out of memory. Tried"),
        ),
        (
            UnsupportedError("no flash kernel for d_k 3\ndetail"),
            Outcome("unsupported", "no flash kernel for d_k 3", reason_code="implementation"),
        ),
        (KeyError(), Outcome("error", "KeyError")),
    ],
)
def test_a_failure_row_is_identity_and_a_one_line_outcome(exc: BaseException, outcome: Outcome) -> None:
    case_identity = CaseIdentity(run_id="r", impl="naive", case_id="s/x")
    failed = case_runner.failure_row(case_identity, exc)
    assert failed == ResultRow(case_identity, outcome)  # nothing measured, nothing modelled


def test_tensor_parallel_without_torchrun_is_refused_before_any_row(tmp_path: Path) -> None:
    from mhabench.errors import InputError
    from mhabench.scenario.loading import parse_config

    data = {"scenarios": [{"seq_len": 8, "d_model": 16, "heads": 2, "tensor_parallel": [1, 2]}]}
    with pytest.raises(InputError, match=re.escape("torchrun --nproc-per-node 2")):
        runner.run(parse_config(data, "x.yaml"), tmp_path / "out", request=RunRequest(config_path="x.yaml"))
    assert not (tmp_path / "out").exists()


class SilentNvml:
    """Just enough NVML for a sampler on the CPU: the energy counter stands still."""

    NVML_CLOCK_SM = 0

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        return 0

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        return 0


def test_a_call_failing_in_the_shared_rounds_fails_only_its_own_row(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Correct on its checked call, then raising: the rounds fail, each impl is timed alone, one error row."""
    from mhabench.impls import build
    from mhabench.impls.registry import _REGISTRY, register
    from mhabench.measure.nvml import RoundSampler

    sampler = RoundSampler(SilentNvml(), "handle", "nvml test")  # NVML answers, so the rows say why they have none
    monkeypatch.setattr(case_runner, "open_sampler", lambda device: contextlib.nullcontext(sampler))

    class FailsWhenTimed(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner, self.calls = inner, 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("kernel lost its mind")
            return self.inner(x)

    name = "test-fails-when-timed"
    register(name, description="test only")(lambda w, heads, pattern: FailsWhenTimed(build("fused", w, heads, pattern)))
    try:
        result = runner.run(tiny(tiny_config_data, implementations=["naive", name, "fused"]), tmp_path)
    finally:
        _REGISTRY.pop(name, None)
    rows = {row.case.impl: row for row in result.rows}
    assert rows[name].outcome == Outcome("error", "RuntimeError: kernel lost its mind")
    assert rows["naive"].status == rows["fused"].status == "ok"
    assert rows["naive"].latency.latency_ms > 0 and rows["fused"].latency.latency_ms > 0
    assert rows["naive"].latency.rounds_id is None  # timed alone: its speedups are not paired
    assert rows["naive"].energy == rows["fused"].energy == Energy(energy_source=case_runner.TIMED_ALONE)


def test_every_ok_row_counts_its_allocations_and_naive_materializes_more(tiny_timing: TimingConfig) -> None:
    """``allocations_per_call`` is measured on the CPU for every eager row: naive materializes its scores,
    softmax and per-step intermediates, SDPA's fused kernel none of them."""
    from mhabench.impls import get_spec

    case = plain_case("t", 2, 16, 32, 4, causal=True, bias=True, dtype="float32", seed=0)
    cpu = torch.device("cpu")
    specs = [get_spec(name) for name in CORE_IMPLEMENTATIONS]
    rows = {row.case.impl: row for row in case_runner.run_case(case, specs, cpu, "r", FIXED_PEAKS, tiny_timing)}
    assert {row.status for row in rows.values()} == {"ok"}
    allocations = {name: row.dispatch.allocations_per_call for name, row in rows.items()}
    assert all(count >= 1 for count in allocations.values()), allocations
    assert allocations["naive"] > allocations["fused"], allocations


def test_one_screen_refuses_before_anything_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tensor-parallel degree, capabilities, memory guard, in that order; no guard, nothing skipped."""
    from mhabench.impls import get_spec

    cpu = torch.device("cpu")
    gqa = plain_case("t", 1, 8, 16, 4, causal=False, bias=False, dtype="float32", seed=0, kv_heads=2)
    split = dataclasses.replace(gqa, kv_heads=4, tensor_parallel=2)
    assert case_runner.screen(get_spec("fused"), split, cpu).error.startswith("fused is not tensor-parallel")
    assert case_runner.screen(get_spec("tp_fused"), split, cpu) is None
    assert case_runner.screen(get_spec("torch_mha"), gqa, cpu) == Outcome(
        "unsupported", "torch_mha: no grouped K/V heads (kv_heads 2 < heads 4)", reason_code="grouped_kv"
    )
    assert case_runner.screen(get_spec("fused"), split, cpu).reason_code == "not_tensor_parallel"
    monkeypatch.setattr(memory_guard, "fits", lambda *args, **kwargs: "predicted 9 GB > available 1 GB")
    assert case_runner.screen(get_spec("fused"), gqa, cpu) == Outcome("skipped", "predicted 9 GB > available 1 GB")
    assert case_runner.screen(get_spec("fused"), gqa, cpu, guard=False) is None


def test_roofline_judges_a_mask_skipping_kernel_on_useful_flops() -> None:
    """Causal flash/cuDNN never runs the masked half: efficiency on useful FLOPs, throughput on both."""
    from mhabench.impls import get_spec
    from mhabench.measure.roofline import roofline
    from mhabench.results.schema import LatencyStats

    case = plain_case("t", 1, 1024, 512, 8, causal=True, bias=False, dtype="float32", seed=0)
    cost = case_runner.modelled_cost(get_spec("fused"), case)
    latency = LatencyStats(latency_ms=2.0)
    peaks = DevicePeaks(peak_tflops=1000.0, peak_gbps=1000.0, source="test")
    tokens = case.workload().tokens
    skipping = roofline(tokens, cost, None, latency, peaks, skips_masked_work=True)
    full = roofline(tokens, cost, None, latency, peaks, skips_masked_work=False)
    assert skipping.achieved_tflops == full.achieved_tflops == cost.flops / 2e-3 / 1e12
    assert skipping.achieved_useful_tflops == cost.useful_flops / 2e-3 / 1e12 < skipping.achieved_tflops
    assert full.roofline_efficiency == full.achieved_tflops / full.attainable_tflops
    assert skipping.roofline_efficiency == skipping.achieved_useful_tflops / skipping.attainable_tflops
    assert (skipping.intensity_source, skipping.skips_masked_work) == ("modelled", True)


STICKY_PLUGIN = """
import torch
from mhabench.impls.registry import register


@register("sticky-test", description="raises a sticky CUDA error text on every call")
class Sticky(torch.nn.Module):
    def __init__(self, weights, heads, causal=False):
        super().__init__()

    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


def test_after_a_sticky_cuda_error_the_rest_of_the_run_goes_on_in_child_processes(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks
) -> None:
    """The error text is CUDA's, raised on the CPU: the parent stops using its context and its drift watch,
    the unfinished implementations of that case run in a child (where the culprit fails again, alone)."""
    from mhabench.impls.registry import _REGISTRY
    from mhabench.scenario import plugins

    plugin = tmp_path / "sticky.py"
    plugin.write_text(STICKY_PLUGIN, encoding="utf-8")
    plugins.load_plugin(plugin)
    try:
        config = tiny(tiny_config_data, implementations=["naive", "sticky-test", "fused"])
        result = runner.run(config, tmp_path / "out")
    finally:
        _REGISTRY.pop("sticky-test", None)
    statuses = {row.case.impl: row.status for row in result.rows}
    assert statuses == {"naive": "ok", "sticky-test": "error", "fused": "ok"}
    assert "illegal memory access" in next(r for r in result.rows if r.case.impl == "sticky-test").outcome.error
    manifest = load_run(result.run_dir).manifest.as_dict()
    assert manifest["status"] == "complete" and "lost its CUDA context" in manifest["drift"]["stopped"]


def test_an_input_that_cannot_be_drawn_fails_only_the_runnable_rows(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("out of memory drawing the input")

    monkeypatch.setattr(case_runner, "make_inputs", no_memory)
    scenario = {"name": "gqa", "batch": 1, "seq_len": 6, "d_model": 16, "heads": 4, "kv_heads": 2}
    result = runner.run(tiny(tiny_config_data, scenarios=[scenario], implementations=["torch_mha", "fused"]), tmp_path)
    assert [(r.case.impl, r.status) for r in result.rows] == [("torch_mha", "unsupported"), ("fused", "oom")]


def test_an_implementation_named_twice_is_refused_in_one_line(tiny_config_data: dict[str, Any]) -> None:
    from mhabench.errors import ConfigError

    with pytest.raises(ConfigError, match="'naive' named more than once"):
        tiny(tiny_config_data, implementations=["naive", "fused", "naive"])


# --- issue 29: torch's expected warnings become the row's note --------------------------------------


class _WarnsLikeNestedSdpa(torch.nn.Module):
    """``fused``, saying on every call what torch's nested SDPA says on a CPU (a log line and a warning)."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logging.getLogger("torch.nested._internal.sdpa").warning("Flash attention kernel not used because:")
        logging.getLogger("torch.nested._internal.sdpa").warning(
            "Nested tensors are not supported when is_causal=True."
        )
        warnings.warn(
            "The PyTorch API of nested tensors is in prototype stage and will change.", UserWarning, stacklevel=2
        )
        return self.inner(x)


def test_expected_torch_warnings_become_the_rows_note_once_and_leave_the_terminal(
    tiny_config_data: dict[str, Any], tmp_path: Path, fixed_peaks: DevicePeaks, capfd: pytest.CaptureFixture[str]
) -> None:
    """Issue 29: raw ``UserWarning`` and glog-style ``W1127 …`` lines from nested SDPA leaked into the output."""
    from mhabench.impls import build
    from mhabench.impls.registry import _REGISTRY, register

    name = "test-warns-like-nested-sdpa"
    register(name, description="test only")(
        lambda w, heads, pattern: _WarnsLikeNestedSdpa(build("fused", w, heads, pattern))
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            result = runner.run(tiny(tiny_config_data, implementations=["naive", name]), tmp_path)
    finally:
        _REGISTRY.pop(name, None)
    notes = {row["impl"]: row["note"] for row in csv_rows(result.run_dir)}
    assert notes == {
        "naive": "",
        name: "torch: Nested tensors are not supported when is_causal=True. | "
        "The PyTorch API of nested tensors is in prototype stage and will change.",
    }
    printed = capfd.readouterr()
    assert "not supported" not in printed.err + printed.out and "prototype" not in printed.err + printed.out


def test_an_unexpected_warning_is_not_swallowed() -> None:
    from mhabench.measure.torch_messages import caught_torch_messages

    with pytest.warns(UserWarning, match="something new"), caught_torch_messages() as messages:
        warnings.warn("something new", UserWarning, stacklevel=2)
    assert messages == []
