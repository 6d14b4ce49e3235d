"""Hardware counters (Nsight Compute) without a GPU: parsing real ``ncu --csv`` output, cutting it into calls,
attributing the calls to rows, the fallbacks and reasons, and the roofline placed by the hardware intensity.

The CSV files under tests/data/ncu/ were recorded on an H200 (torch 2.11+cu130, ncu 2025.3.1) for a
hand-written fused and naive layer, bf16, b=1, n=4096, d_model=4096, 32 heads (../shared/reference/
performance-model.md). The marker rows that the profiled child adds are built here from the same columns.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

import pytest
import torch

from mhabench.measure import nsight
from mhabench.measure.peaks import DevicePeaks
from mhabench.measure.roofline import roofline
from mhabench.results.gpu_groups import HardwareCounters
from mhabench.results.kernels import KERNELS_NAME, append_kernels, read_kernels, top_kernels
from mhabench.results.schema import CaseIdentity, Counted, LatencyStats, Outcome, ResultRow
from mhabench.run import ncu_profile
from mhabench.run.ncu_child import ProfileJob
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.config import RunConfig

DATA = Path(__file__).parent / "data" / "ncu"
B, N, D = 1, 4096, 4096


def fixture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def marker_line(kernel_id: int) -> str:
    """A CSV row of the marker kernel (``torch.cuda._sleep``), in the recorded files' columns."""
    out = io.StringIO()
    name = "at::cuda::<unnamed>::spin_kernel(long)"
    fields = [str(kernel_id), "1", "python3.12", "127.0.0.1", name, "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0", "9.0"]
    csv.writer(out, quoting=csv.QUOTE_ALL).writerow(
        [*fields, "Command line profiler metrics", "gpu__time_duration.sum", "ns", "1,024"]
    )
    return out.getvalue().strip()


def with_markers(*outputs: str) -> str:
    """The recorded profiles of several calls as one profile, a marker before each call, IDs renumbered."""
    lines, next_id = [], 0
    for output in outputs:
        lines.append(marker_line(next_id))
        next_id += 1
        rows = list(csv.reader(line for line in output.splitlines() if line.startswith('"')))
        header, body = rows[0], rows[1:]
        first = next_id
        for row in body:
            row[0] = str(first + int(row[0]))
            next_id = max(next_id, int(row[0]) + 1)
            out = io.StringIO()
            csv.writer(out, quoting=csv.QUOTE_ALL).writerow(row)
            lines.append(out.getvalue().strip())
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerow(header)
    return "==PROF== Connected to process 1\n" + "\n".join([out.getvalue().strip(), *lines]) + "\n"


def ok_row(impl: str, measured_bytes: int | None = None) -> ResultRow:
    ident = CaseIdentity(run_id="r", case_id="c", impl=impl, dtype="bfloat16", repeat=0)
    counted = Counted(measured_bytes=measured_bytes) if measured_bytes else None
    return ResultRow(ident, Outcome("ok", ""), counted=counted)


# --- parsing ----------------------------------------------------------------------------------------


def test_parse_reads_every_kernel_of_the_recorded_fused_layer_in_launch_order() -> None:
    kernels = nsight.parse_csv(fixture("ncu_fused.csv"))
    assert [k.index for k in kernels] == [0, 1, 2]
    assert kernels[1].name.startswith("cudnn_generated_fort_native_sdpa_sm90_flash_fprop")
    assert kernels[0].metrics[nsight.DRAM_READ] == 458_732_032  # thousands separators dropped
    assert kernels[0].metrics[nsight.DURATION] == pytest.approx(620_288e-9)  # ns → s
    assert not any(k.is_marker for k in kernels)


def test_tensor_flops_of_the_recorded_fused_layer_are_its_gemms_and_attention_exactly() -> None:
    """2 per FMA: QKV + W_o GEMMs 8·b·n·d², QKᵀ and P·V 4·b·n²·d."""
    kernels = nsight.parse_csv(fixture("ncu_flops.csv"))
    counters = nsight.counters_of(kernels, "bfloat16", "ncu test", None)
    assert counters.tensor_flops == 8 * B * N * D * D + 4 * B * N * N * D
    assert counters.fp32_flops is None and counters.hardware_intensity is None  # not asked for in that recording


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        ("1,024", "byte", 1024.0),
        ("2.5", "Kbyte", 2500.0),
        ("3", "Mbyte", 3e6),
        ("7", "usecond", 7e-6),
        ("n/a", "", None),
    ],
)
def test_metric_values_are_read_in_base_units(value: str, unit: str, expected: float | None) -> None:
    assert nsight.metric_value(value, unit) == expected


def test_an_unknown_unit_is_refused_rather_than_read_as_bytes() -> None:
    with pytest.raises(nsight.NcuOutputError, match="unit"):
        nsight.metric_value("1", "furlong")


def test_counters_sum_the_kernels_and_compare_dram_with_the_counted_bytes() -> None:
    kernels = nsight.parse_csv(fixture("ncu_fused.csv"))
    read = 458_732_032 + 100_729_856 + 148_669_952
    write = 94_455_552 + 22_726_656 + 25_400_320
    counters = nsight.counters_of(kernels, "bfloat16", "ncu 2025.3.1", counted_bytes=(read + write) / 2)
    assert (counters.dram_read_bytes, counters.dram_write_bytes) == (read, write)
    assert counters.l2_bytes == 3_184_167_296 + 1_479_389_824 + 1_010_699_648
    assert counters.kernels_profiled == 3 and counters.hardware_counted_bytes_ratio == pytest.approx(2.0)
    assert counters.kernel_time_ms == pytest.approx((620_288 + 514_976 + 219_744) / 1e6)
    assert counters.counters_source == "ncu 2025.3.1"


def test_fp32_flops_count_an_fma_twice() -> None:
    kernel = nsight.Kernel(0, "k", {nsight.FFMA: 10.0, nsight.FADD: 3.0, nsight.FMUL: 4.0})
    assert nsight.fp32_flops([kernel]) == 27
    assert nsight.fp32_flops([nsight.Kernel(0, "k", {nsight.FFMA: 10.0})]) is None


# --- cutting the profile into calls and attributing them -------------------------------------------


def test_markers_cut_a_profile_into_one_call_per_implementation() -> None:
    kernels = nsight.parse_csv(with_markers(fixture("ncu_fused.csv"), fixture("ncu_naive.csv")))
    fused, naive = nsight.split_at_markers(kernels, 2)
    assert len(fused) == 3 and len(naive) == 9
    assert "cunn_SoftMaxForward" in naive[5].name


def test_a_profile_whose_markers_do_not_match_the_calls_is_refused() -> None:
    kernels = nsight.parse_csv(with_markers(fixture("ncu_fused.csv")))
    with pytest.raises(nsight.NcuOutputError, match="1 marker"):
        nsight.split_at_markers(kernels, 2)
    with pytest.raises(nsight.NcuOutputError, match="before the first marker"):
        nsight.split_at_markers(nsight.parse_csv(fixture("ncu_fused.csv")) + kernels, 1)


def test_attribution_gives_each_row_its_own_call_and_the_kernel_lines() -> None:
    output = with_markers(fixture("ncu_fused.csv"), fixture("ncu_naive.csv"))
    status = [{"impl": "fused", "error": None}, {"impl": "naive", "error": None}]
    rows = [ok_row("naive", 7_046_431_232), ok_row("fused", 469_762_048), ok_row("per_head")]
    profile = ncu_profile.attribute(output, status, rows, "ncu 2025.3.1")
    assert profile.counters["fused"].kernels_profiled == 3
    assert profile.counters["naive"].kernels_profiled == 9
    assert profile.counters["per_head"].counters_source.startswith("not profiled")
    # the finding, from the recorded files: fused moves about twice what is counted for it
    assert profile.counters["fused"].hardware_counted_bytes_ratio == pytest.approx(1.816, abs=0.01)
    assert {line["impl"] for line in profile.kernels} == {"fused", "naive"} and len(profile.kernels) == 12


def test_an_fp8_row_gets_no_tensor_flops_from_the_bf16_counter() -> None:
    """``fused_fp8`` sits in a bf16 case but runs on the fp8 tensor cores: the bf16 counter would read its FLOPs as
    0, so tensor_flops stays empty and counters_source says why (the rest of the profile is kept)."""
    output = with_markers(fixture("ncu_flops.csv"), fixture("ncu_flops.csv"))
    status = [{"impl": "fused", "error": None}, {"impl": "fused_fp8", "error": None}]
    profile = ncu_profile.attribute(output, status, [ok_row("fused"), ok_row("fused_fp8")], "ncu 2025.3.1")
    fp8, bf16 = profile.counters["fused_fp8"], profile.counters["fused"]
    assert bf16.tensor_flops == 8 * B * N * D * D + 4 * B * N * N * D and bf16.counters_source == "ncu 2025.3.1"
    assert fp8.tensor_flops is None and fp8.kernels_profiled == bf16.kernels_profiled == 3
    assert fp8.counters_source == "ncu 2025.3.1, no float8_e4m3fn tensor counter checked: tensor_flops not read"


def test_a_call_that_raised_in_the_child_gets_its_error_and_no_numbers() -> None:
    output = with_markers(fixture("ncu_fused.csv"))
    profile = ncu_profile.attribute(
        output, [{"impl": "fused", "error": "OutOfMemoryError: x"}], [ok_row("fused")], "ncu"
    )
    assert profile.counters["fused"] == HardwareCounters(counters_source="profiled call failed: OutOfMemoryError: x")


# --- launching ncu (a fake process runner) -----------------------------------------------------------


class FakeNcu:
    """Answers ``--version`` and, for a profile, writes the child's status and returns the CSV it was given."""

    def __init__(self, profiles: list[ncu_profile.Finished], status: list[dict[str, object]]) -> None:
        self.profiles = profiles
        self.status = status
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], timeout_s: float) -> ncu_profile.Finished:
        self.commands.append(command)
        if command[-1] == "--version":
            return ncu_profile.Finished(0, "NVIDIA (R) Nsight Compute\nVersion 2025.3.1.0 (build 1)\n", "")
        done = self.profiles.pop(0)
        if done.returncode == 0:
            Path(command[-1]).write_text(json.dumps(self.status), encoding="utf-8")
        return done


def job() -> ProfileJob:
    """A bf16 case's job (the case is only pickled and read for its dtype here)."""
    config = RunConfig.model_validate(
        {"dtype": "bfloat16", "scenarios": [{"name": "s", "seq_len": 8, "d_model": 8, "heads": 2}]}
    )
    case = expand_cases(config, torch.device("cpu"))[0]
    return ProfileJob(case=case, impl_names=("fused",), device="cuda:0", allocator="steady", threads=None)


def test_profile_case_runs_the_child_under_ncu_with_the_timings_cache_policy() -> None:
    fake = FakeNcu([ncu_profile.Finished(0, with_markers(fixture("ncu_fused.csv")), "")], [{"impl": "fused"}])
    dtype_job = job()
    profile = ncu_profile.profile_case(dtype_job, [ok_row("fused")], True, 60, Path("/opt/ncu"), fake)
    command = fake.commands[1]
    assert command[:2] == ["/opt/ncu", "--csv"] and command[command.index("--cache-control") + 1] == "all"
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert command[command.index("--replay-mode") + 1] == "kernel"  # one result per kernel, for kernels.csv
    assert command[command.index("--clock-control") + 1] == "none"
    assert "mhabench.run.ncu_child" in command
    assert profile.counters["fused"].counters_source == "ncu 2025.3.1.0"


def test_counters_taken_without_the_flush_are_flagged_as_warm() -> None:
    fake = FakeNcu([ncu_profile.Finished(0, with_markers(fixture("ncu_fused.csv")), "")], [{"impl": "fused"}])
    profile = ncu_profile.profile_case(job(), [ok_row("fused")], False, 60, Path("/opt/ncu"), fake)
    assert fake.commands[1][fake.commands[1].index("--cache-control") + 1] == "none"
    assert profile.counters["fused"].counters_source == f"ncu 2025.3.1.0, {nsight.WARM_L2}"
    assert profile.counters["fused"].dram_read_bytes is not None  # flagged, not refused
    assert nsight.source_label(None, True) == "ncu"


def test_an_unknown_metric_is_retried_with_the_checked_metrics_only() -> None:
    refused = ncu_profile.Finished(1, "", "==ERROR== Failed to find metric smsp__sass_thread_inst_executed_op_ffma")
    fake = FakeNcu([refused, ncu_profile.Finished(0, with_markers(fixture("ncu_fused.csv")), "")], [{"impl": "fused"}])
    dtype_job = job()
    profile = ncu_profile.profile_case(dtype_job, [ok_row("fused")], False, 60, Path("ncu"), fake)
    second = fake.commands[2][fake.commands[2].index("--metrics") + 1].split(",")
    assert nsight.FFMA not in second and "sm__ops_path_tensor_src_bf16_dst_fp32.sum" in second
    assert fake.commands[2][fake.commands[2].index("--cache-control") + 1] == "none"
    assert profile.counters["fused"].dram_read_bytes == 458_732_032 + 100_729_856 + 148_669_952


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "no permission (ERR_NVGPUCTRPERM)"),
        ("==ERROR== The application returned an error code (1).", "ncu failed: The application returned an error"),
    ],
)
def test_ncu_failures_leave_the_columns_empty_with_the_reason(stdout: str, reason: str) -> None:
    fake = FakeNcu([ncu_profile.Finished(1, stdout, "")], [])
    dtype_job = job()
    profile = ncu_profile.profile_case(dtype_job, [ok_row("fused")], True, 60, Path("ncu"), fake)
    assert profile.counters["fused"].counters_source.startswith(reason)
    assert profile.counters["fused"].dram_read_bytes is None


def test_without_ncu_nothing_is_launched() -> None:
    def never(command: list[str], timeout_s: float) -> ncu_profile.Finished:
        raise AssertionError("launched")

    profile = ncu_profile.profile_case(job(), [ok_row("fused")], True, 60, None, never)
    assert profile.counters["fused"].counters_source == "no ncu"


def test_find_ncu_looks_on_path(tmp_path: Path) -> None:
    ncu = tmp_path / "ncu"
    ncu.write_text("#!/bin/sh\n")
    ncu.chmod(0o755)
    assert nsight.find_ncu(str(tmp_path)) == ncu


def test_rows_say_why_they_have_no_counters_when_not_requested_or_on_the_cpu(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"scenarios": [{"name": "s", "seq_len": 8, "d_model": 8, "heads": 2}]})
    off = ncu_profile.case_counters(
        job().case, [ok_row("fused")], torch.device("cuda"), ncu_profile.CounterSettings.of(config, tmp_path)
    )
    assert off == {"fused": [HardwareCounters(counters_source="not requested")]}
    wanted = ncu_profile.CounterSettings.of(config.model_copy(update={"counters": "hardware"}), tmp_path)
    cpu = ncu_profile.case_counters(job().case, [ok_row("fused")], torch.device("cpu"), wanted)
    assert cpu == {"fused": [HardwareCounters(counters_source="CPU device")]}


def test_the_settings_default_to_range_replay_without_the_fp32_counters(tmp_path: Path) -> None:
    config = RunConfig.model_validate({"scenarios": [{"name": "s", "seq_len": 8, "d_model": 8, "heads": 2}]})
    settings = ncu_profile.CounterSettings.of(config, tmp_path)
    assert (settings.replay, settings.fp32, settings.requested) == ("range", False, False)
    assert nsight.FFMA not in nsight.metrics_for("bfloat16")
    assert set(nsight.FP32_METRICS) <= set(nsight.metrics_for("bfloat16", fp32=True))


def range_output(*outputs: str) -> str:
    """Range replay's CSV for several calls: each recorded call summed into one result (what ncu reports for a
    range), IDs in call order."""
    lines = []
    header: list[str] = []
    for index, output in enumerate(outputs):
        rows = list(csv.reader(line for line in output.splitlines() if line.startswith('"')))
        header, body = rows[0], rows[1:]
        totals: dict[tuple[str, str], float] = {}
        first = body[0]
        for row in body:
            metric, unit = row[header.index("Metric Name")], row[header.index("Metric Unit")]
            value = nsight.metric_value(row[header.index("Metric Value")], unit) or 0.0
            totals[(metric, "")] = totals.get((metric, ""), 0.0) + value
        for (metric, unit), value in totals.items():
            row = list(first)
            row[0], row[header.index("Kernel Name")] = str(index), f"range {index}"
            row[header.index("Metric Name")], row[header.index("Metric Unit")] = metric, unit
            row[header.index("Metric Value")] = repr(value)
            out = io.StringIO()
            csv.writer(out, quoting=csv.QUOTE_ALL).writerow(row)
            lines.append(out.getvalue().strip())
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerow(header)
    return "\n".join([out.getvalue().strip(), *lines]) + "\n"


def range_job() -> ProfileJob:
    return dataclasses.replace(job(), impl_names=("naive", "fused"), replay="range")


def test_range_replay_gives_each_call_one_result_and_says_so() -> None:
    output = range_output(fixture("ncu_naive.csv"), fixture("ncu_fused.csv"))
    fake = FakeNcu([ncu_profile.Finished(0, output, "")], [{"impl": "naive"}, {"impl": "fused"}])
    profile = ncu_profile.profile_case(range_job(), [ok_row("naive"), ok_row("fused")], True, 60, Path("ncu"), fake)
    command = fake.commands[1]
    assert command[command.index("--replay-mode") + 1] == "range"
    assert nsight.FFMA not in command[command.index("--metrics") + 1]  # one pass: no FP32 counters by default
    fused = profile.counters["fused"]
    assert fused.counters_source == f"ncu 2025.3.1.0, {nsight.RANGE_NOTE}"
    assert fused.dram_read_bytes == 458_732_032 + 100_729_856 + 148_669_952  # the recorded kernels' sum
    assert fused.kernels_profiled is None and profile.kernels == []  # no per-kernel detail from a range
    assert fused.fp32_flops is None  # not asked for


def test_a_range_replay_ncu_refuses_is_profiled_again_by_kernel() -> None:
    refused = ncu_profile.Finished(1, "==ERROR== Range replay is not supported for cudaMalloc", "")
    by_kernel = ncu_profile.Finished(0, with_markers(fixture("ncu_naive.csv"), fixture("ncu_fused.csv")), "")
    fake = FakeNcu([refused, by_kernel], [{"impl": "naive"}, {"impl": "fused"}])
    profile = ncu_profile.profile_case(range_job(), [ok_row("naive"), ok_row("fused")], True, 60, Path("ncu"), fake)
    assert [c[c.index("--replay-mode") + 1] for c in fake.commands[1:]] == ["range", "kernel"]
    source = profile.counters["fused"].counters_source
    assert source == "ncu 2025.3.1.0 (range replay failed: ncu failed: Range replay is not supported for cudaMalloc)"
    assert profile.kernels  # kernel replay keeps each kernel


def test_a_range_count_that_does_not_match_the_calls_is_refused() -> None:
    output = range_output(fixture("ncu_fused.csv"))
    profile = ncu_profile.attribute(output, [{"impl": "naive"}, {"impl": "fused"}], [ok_row("fused")], "ncu", "range")
    assert (
        profile.counters["fused"].counters_source == "ncu output not attributable: 1 ranges in the profile for 2 calls"
    )


def test_kernels_file_keeps_each_rows_kernels_and_gives_the_longest(tmp_path: Path) -> None:
    output = with_markers(fixture("ncu_naive.csv"))
    profile = ncu_profile.attribute(output, [{"impl": "naive"}], [ok_row("naive")], "ncu")
    append_kernels(tmp_path, profile.kernels)
    append_kernels(tmp_path, profile.kernels[:1])
    kernels = read_kernels(tmp_path)
    assert kernels is not None and len(kernels) == 10 and (tmp_path / KERNELS_NAME).is_file()
    top = top_kernels(kernels, "c", "naive", 0, 2)
    assert "cunn_SoftMaxForward" in top.iloc[0]["kernel_name"] and len(top) == 2


# --- the roofline by the hardware intensity ------------------------------------------------------------


def test_the_roofline_uses_the_hardware_intensity_and_its_executed_flops() -> None:
    peaks = DevicePeaks(989.0, 3350.0, "datasheet:H100 SXM")
    latency = LatencyStats.from_samples((1.0,), 1, 0.1, math.nan)
    counted = Counted(measured_flops=1_000, measured_bytes=10, model_disagreement=0.0)
    counters = HardwareCounters(
        dram_read_bytes=15, dram_write_bytes=5, tensor_flops=600, fp32_flops=0, hardware_intensity=30.0
    )
    placed = roofline(1, None, counted, latency, peaks, skips_masked_work=True, hardware=counters)
    assert placed.intensity_source == "hardware"
    assert placed.achieved_tflops == pytest.approx(600 / 1e-3 / 1e12)
    without = roofline(1, None, counted, latency, peaks, skips_masked_work=False)
    assert without.intensity_source == "measured"


def test_a_cpu_run_says_why_each_row_has_no_counters_or_energy_and_report_lists_kernels(tmp_path: Path) -> None:
    """End to end on the CPU: ``--counters hardware`` runs, every ok row says "CPU device" for both; a kernels.csv
    (the recorded naive call, keyed to one of the run's rows) is what ``report --kernels`` lists."""
    from typer.testing import CliRunner

    from mhabench.cli import app
    from mhabench.results.store import load_run

    config = tmp_path / "tiny.yaml"
    config.write_text(
        "name: tiny\ndevice: cpu\ntiming: {min_run_time_s: 0.01, max_run_time_s: 0.05, min_samples: 2, "
        "warmup_runs: 1, warmup_max_s: 0.02}\nimplementations: [naive, fused]\n"
        "scenarios: [{name: s, seq_len: 16, d_model: 32, heads: 2}]\n",
        encoding="utf-8",
    )
    done = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "out"), "--counters", "hardware"])
    assert done.exit_code == 0, done.output
    (run_dir,) = (tmp_path / "out").iterdir()
    rows = load_run(str(run_dir), tmp_path).frame
    assert set(rows["counters_source"]) == {"CPU device"} and set(rows["energy_source"]) == {"CPU device"}
    assert rows["dram_read_bytes"].isna().all() and rows["energy_per_call_j"].isna().all()
    naive = rows[rows["impl"] == "naive"].iloc[0]
    profile = ncu_profile.attribute(
        with_markers(fixture("ncu_naive.csv")), [{"impl": "naive"}], [ok_row("naive")], "ncu"
    )
    append_kernels(run_dir, [{**line, "case_id": naive["case_id"]} for line in profile.kernels])
    report = CliRunner().invoke(app, ["report", str(run_dir), "--format", "md", "--kernels", "2"])
    assert report.exit_code == 0, report.output
    text = (run_dir / "report.md").read_text(encoding="utf-8")
    assert "Top kernels" in text and "cunn_SoftMaxForward" in text


def test_the_counters_stage_runs_once_every_layer_of_the_case_is_freed(
    monkeypatch: pytest.MonkeyPatch, tiny_timing: object, registry_snapshot: None
) -> None:
    """The profiled child gets the case's memory only if ``run_case`` holds no layer when it starts: every module
    the case built is gone (garbage collected) when ``case_counters`` is called, and the ok rows still arrive."""
    import gc
    import weakref

    from torch import nn

    from mhabench.impls import get_spec, register
    from mhabench.run import case as case_runner
    from mhabench.run.case import run_case

    built: list[weakref.ref[nn.Module]] = []

    def factory(weights: object, heads: int, pattern: object) -> nn.Module:
        layer = get_spec("fused").factory(weights, heads, pattern)  # a real layer: the rows must come out ok
        built.append(weakref.ref(layer))
        return layer

    for name in ("held-a", "held-b"):
        register(name, description="test only")(factory)
    alive_at_counters: list[int] = []

    def counters(case: object, rows: list[ResultRow], device: torch.device, settings: object) -> dict:
        gc.collect()
        alive_at_counters.append(sum(ref() is not None for ref in built))
        return {}

    monkeypatch.setattr(case_runner, "case_counters", counters)
    config = RunConfig.model_validate({"scenarios": [{"name": "s", "seq_len": 8, "d_model": 8, "heads": 2}]})
    (case,) = expand_cases(config, torch.device("cpu"))
    peaks = DevicePeaks(1.0, 20.0, "test-fixed")
    specs = [get_spec("held-a"), get_spec("held-b")]
    settings = ncu_profile.CounterSettings(requested=True)
    rows = list(run_case(case, specs, torch.device("cpu"), "r", peaks, tiny_timing, counters=settings))
    assert [row.status for row in rows] == ["ok", "ok"] and built
    assert alive_at_counters == [0]
