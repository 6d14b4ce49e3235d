"""The why rules where two of them could disagree about one row, on synthetic rows: a row near its roof is never
launch-bound, a kernel that skips masked blocks is placed by what it executed, and the short answer under a run's
table says first what the run doubts about its own answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from said_from_record import roofline
from synthetic_runs import calibrate_test_machine, rounds, row, write_run

from mhabench.analysis.advice import why
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.advice.cases import MeasuredCase, cases_of
from mhabench.analysis.advice.thresholds import HOST_OVER_DEVICE, HOST_US_PER_OP, LOW_EFFICIENCY
from mhabench.analysis.answer import thresholds_record
from mhabench.analysis.estimate import MIN_PAIRED_ROUNDS
from mhabench.analysis.throughput import USEFUL_EFFICIENCY, throughput
from mhabench.answers_on_disk import answer_at_end
from mhabench.results.columns import noisy
from mhabench.results.store import load_run
from mhabench.views.advice import short_answer
from mhabench.views.wording import sentence as text_of


def one_case(medians_ms: dict[str, float], **fields: Any) -> MeasuredCase:
    """One case of these implementations, ``fields`` set on every row."""
    times = rounds(medians_ms, count=20)
    (case,) = cases_of("run", pd.DataFrame([{**row(impl, times[impl]), **fields} for impl in medians_ms]))
    return case


def at_efficiency(case: MeasuredCase, impl: str, efficiency: float, **fields: Any) -> MeasuredCase:
    """``case`` with ``impl``'s row reaching ``efficiency`` of its attainable throughput, plus ``fields``: its useful
    FLOPs and bytes scaled together, so its intensity (and roof) stay and its useful TFLOP/s moves."""
    row = case.row(impl)
    point = throughput(pd.DataFrame([dict(row)])).iloc[0]
    scale = efficiency / point[USEFUL_EFFICIENCY]
    scaled = {"useful_flops": row["useful_flops"] * scale, "bytes_moved": row["bytes_moved"] * scale}
    records = [{**r, **scaled, **fields} if r["impl"] == impl else dict(r) for r in case.rows]
    (changed,) = cases_of("run", pd.DataFrame(records))
    return changed


def test_a_cuda_row_near_its_roof_is_not_launch_bound_however_slow_its_host() -> None:
    case = one_case({"fused": 1.0, "naive": 2.0})
    latency_ms = case.row("fused")["latency_ms"]
    slow_host = {"host_latency_ms": 2 * HOST_OVER_DEVICE * latency_ms, "ops_per_call": 10_000}
    near = at_efficiency(case, "fused", 0.57, **slow_host)
    assert why.launch(near, "fused", "cuda") is None
    roof = roofline(near, "fused")
    assert roof is not None and "`fused` is compute-bound" in text_of(roof) and "57.0%" in text_of(roof)
    far = why.launch(at_efficiency(case, "fused", LOW_EFFICIENCY / 2, **slow_host), "fused", "cuda")
    assert far is not None and "on the host against" in text_of(far) and "dispatched ops" not in text_of(far)


def test_many_cuda_ops_alone_are_not_launch_bound() -> None:
    case = one_case({"fused": 1.0, "naive": 2.0})
    far = at_efficiency(case, "fused", LOW_EFFICIENCY / 2, ops_per_call=10_000)
    assert why.launch(far, "fused", "cuda") is None


def test_a_cpu_row_near_its_roof_is_not_launch_bound_however_many_ops() -> None:
    case = one_case({"naive": 1.0, "fused": 2.0})
    many = round(case.row("naive")["latency_ms"] * 1e3 / HOST_US_PER_OP["cpu"]) * 2
    assert why.launch(at_efficiency(case, "naive", 0.5, ops_per_call=many), "naive", "cpu") is None
    bound = why.launch(at_efficiency(case, "naive", 0.1, ops_per_call=many), "naive", "cpu")
    assert bound is not None and "launch-bound" in text_of(bound)


def test_a_kernel_that_skips_masked_blocks_is_judged_on_its_useful_flops_and_shows_what_it_executed() -> None:
    case = one_case({"fused": 1.0, "naive": 2.0}, causal=True)
    fused = case.row("fused")
    flops, bytes_moved, latency_s = fused["flops"], fused["bytes_moved"], fused["latency_ms"] / 1e3
    records = [
        {
            **r,
            "skips_masked_work": True,
            "useful_flops": flops / 2,
            "achieved_useful_tflops": flops / 2 / latency_s / 1e12,
        }
        if r["impl"] == "fused"
        else dict(r)
        for r in case.rows
    ]
    (skipping,) = cases_of("run", pd.DataFrame(records))
    found = roofline(skipping, "fused")
    assert found is not None and "useful FLOPs, masked blocks skipped" in text_of(found)
    # the table's figures: useful FLOPs over the model's bytes and over the time
    assert found.figures["intensity_flop_per_byte"] == pytest.approx(flops / 2 / bytes_moved)
    assert found.figures["useful_tflops"] == pytest.approx(flops / 2 / latency_s / 1e12)
    assert found.figures["executed_over_useful"] == pytest.approx(1.0)  # it executed the useful FLOPs only
    assert "it executed 1.00× the useful FLOPs" in text_of(found)


def test_wasted_work_never_reads_as_efficiency() -> None:
    case = one_case({"fused": 1.0, "naive": 2.0})
    wasteful = {**dict(case.row("fused")), "achieved_tflops": 8 * case.row("fused")["achieved_tflops"]}
    (eight,) = cases_of("run", pd.DataFrame([wasteful if r["impl"] == "fused" else dict(r) for r in case.rows]))
    before, after = roofline(case, "fused"), roofline(eight, "fused")
    assert before is not None and after is not None
    assert after.figures["efficiency"] == before.figures["efficiency"]  # 8× the FLOPs in the same time: no credit
    assert after.figures["executed_over_useful"] == pytest.approx(8.0) and "executed 8.00×" in text_of(after)


def test_an_efficiency_printed_as_the_threshold_is_not_called_under_it() -> None:
    case = at_efficiency(one_case({"fused": 1.0, "naive": 2.0}), "fused", LOW_EFFICIENCY - 0.0004)
    found = roofline(case, "fused")
    assert found is not None and "25.0%" in text_of(found) and "under 25 %" not in text_of(found)
    far = roofline(at_efficiency(case, "fused", 0.1), "fused")
    assert far is not None and "far from both roofs" in text_of(far) and "-bound" not in text_of(far)


def test_scores_are_materialized_where_the_cost_model_says_so() -> None:
    case = one_case({"naive": 2.0, "fused": 1.0, "per_head": 3.0}, seq_len=512, dtype="float16")
    naive = why.scores(case, "naive", 2**20)
    assert naive is not None and naive.figures["score_bytes"] == 1 * 4 * 512 * 512 * 2  # b·h·n·n float16
    assert why.scores(case, "per_head", 2**20) is not None
    huge = [{**r, "attn_bytes": 10**12} for r in case.rows]
    (traffic,) = cases_of("run", pd.DataFrame(huge))
    assert why.scores(traffic, "fused", 2**20) is None  # bytes do not make a fused kernel materialize


def test_the_thresholds_record_holds_every_threshold() -> None:
    record = thresholds_record()
    assert record["min_paired_rounds"] == MIN_PAIRED_ROUNDS and record["low_efficiency"] == LOW_EFFICIENCY
    assert {"tie_margin", "host_us_per_op", "launch_bound_share", "host_over_device"} <= set(record)
    assert "reproduce_margin" not in record  # the machine's calibrated spread decides that now


def test_a_noisy_flag_below_the_spread_samples_is_undefined() -> None:
    assert noisy({"samples": 3, "noisy": True}) is None
    assert noisy({"samples": 5, "noisy": True}) is True
    assert noisy({"samples": "", "noisy": "false"}) is False


def test_a_win_within_the_machine_spread_is_said_before_any_why(tmp_path: Path) -> None:
    times = rounds({"fused": 1.0, "naive": 1.06}, count=20, noise=0.001)
    run_dir = write_run(tmp_path, "close", [row(impl, times[impl]) for impl in times])
    calibrate_test_machine(0.10)
    lines = short_answer(answer_at_end(load_run(run_dir)), run_dir)  # the run records it
    assert 3 <= len(lines) <= 5 and lines[1].startswith("Caveat: 1 pick(s) may not replicate")
    assert not any(line.startswith("Why:") for line in lines)


def test_on_an_uncalibrated_machine_the_short_answer_says_so_before_any_why(tmp_path: Path) -> None:
    """Whatever the lead: nothing says a one-process pick replicates until the machine's spread is measured."""
    times = rounds({"fused": 1.0, "naive": 3.0}, count=20)
    run_dir = write_run(tmp_path, "clear", [row(impl, times[impl]) for impl in times])
    lines = short_answer(advise([load_run(run_dir)]), run_dir)
    assert lines[1].startswith("Caveat: 1 pick(s) rest on one process") and "mhabench calibrate" in lines[1]
    assert not any(line.startswith("Why:") for line in lines)


def test_the_short_answer_says_why_from_the_winners_side(tmp_path: Path) -> None:
    times = rounds({"fused": 1.0, "naive": 3.0}, count=20)
    run_dir = write_run(tmp_path, "clear", [row(impl, times[impl]) for impl in times])
    calibrate_test_machine(0.02)  # a 3× lead clears it: no caveat outweighs the why
    lines = short_answer(answer_at_end(load_run(run_dir)), run_dir)  # the run records it
    (reason,) = [line for line in lines if line.startswith("Why:")]
    assert "`fused`" in reason.split(":", 2)[2][:12] and "`naive` materializes" not in reason


def test_a_row_with_its_own_head_width_is_rebuilt_with_that_width() -> None:
    """Gemma 2's 8 heads of 256 in a 2304-wide model: the cost the why quotes is for 256-wide heads, not 288."""
    fields = {"batch": 1, "seq_len": 64, "d_model": 2304, "heads": 8, "kv_heads": 4, "dtype": "float32"}
    own = why.row_case({**fields, "head_dim": 256})
    plain = why.row_case({**fields, "head_dim": None})
    assert own is not None and plain is not None
    assert (own.head_dim, plain.head_dim) == (256, 288)
    assert own.workload().q_dim == 8 * 256
