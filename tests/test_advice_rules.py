"""Each rule of ``mhabench advise`` on synthetic rows whose right answer is known, the honest "cannot tell"
cases included: overlapping intervals, too few rounds, repeats that disagree, a CPU run asked about a GPU."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from said_from_record import roofline, statement
from synthetic_runs import rounds, row, samples, write_run

from mhabench.analysis.advice import why
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.advice.cases import MeasuredCase, cases_of
from mhabench.analysis.advice.caveats import caveats
from mhabench.analysis.advice.change import changes
from mhabench.analysis.advice.crossover import crossovers
from mhabench.analysis.advice.pick import CANNOT_TELL, NOTHING, ONLY, TIED, WINNER, pick
from mhabench.analysis.advice.thresholds import HOST_US_PER_OP, LAUNCH_BOUND_SHARE, TIE_MARGIN
from mhabench.analysis.answer import plain
from mhabench.analysis.estimate import MIN_PAIRED_ROUNDS
from mhabench.analysis.statement import Question
from mhabench.analysis.stats import MIN_INTERVAL_SAMPLES
from mhabench.errors import InputError
from mhabench.results.manifest import Manifest
from mhabench.results.store import load_run
from mhabench.views import spelling, wording
from mhabench.views.wording import sentence as text_of


def reason(found: Any) -> str:
    """The words of a pick's reason code."""
    return wording.reason(found.reason_code, found.reason_figures, found.impls[0])


def cases(records: list[dict[str, Any]], run_id: str = "run") -> list[MeasuredCase]:
    return cases_of(run_id, pd.DataFrame(records))


def one_case(medians_ms: dict[str, float], count: int = 20, noise: float = 0.01, **fields: Any) -> MeasuredCase:
    """One case whose implementations were timed in ``count`` shared rounds around these medians."""
    times = rounds(medians_ms, count=count, noise=noise)
    (case,) = cases([row(impl, times[impl], **fields) for impl in medians_ms])
    return case


# --- pick ------------------------------------------------------------------------------------------


def test_a_clear_lead_is_a_winner_with_its_paired_interval_over_the_runner_up() -> None:
    found = pick(one_case({"naive": 2.0, "per_head": 3.0, "fused": 1.0}))
    assert (found.verdict, found.impls, found.runner_up) == (WINNER, ("fused",), "naive")
    assert found.estimate is not None and found.estimate.ci_low > 1.9 and found.estimate.ratio == pytest.approx(2, 0.02)
    sentence = statement(found)
    assert "`fused` wins, 2.0" in text_of(sentence) and "over `naive` (paired over 20 rounds)" in text_of(sentence)
    assert {one.impl for one in sentence.figures["case"].impls} == {"naive", "per_head", "fused"}


def test_overlapping_intervals_are_no_clear_winner_and_name_the_tied() -> None:
    found = pick(one_case({"naive": 1.0, "fused": 1.0, "per_head": 2.0}, noise=0.05))
    assert found.verdict == TIED and set(found.impls) == {"naive", "fused"}
    text = text_of(statement(found))
    assert "no clear winner" in text and "the interval includes 1" in text and "`per_head` clearly slower" in text


def test_a_significant_lead_under_the_tie_margin_is_still_a_tie() -> None:
    found = pick(one_case({"naive": 1 + TIE_MARGIN / 2, "fused": 1.0}, count=40, noise=0.0005))
    assert found.estimate is not None and found.estimate.ci_low > 1  # significant, but too small to survive a rerun
    assert found.verdict == TIED and "the lead is under 3 %" in text_of(statement(found))


@pytest.mark.parametrize("count", [1, MIN_INTERVAL_SAMPLES - 1])
def test_too_few_rounds_for_an_interval_cannot_tell_even_with_a_large_lead(count: int) -> None:
    found = pick(one_case({"naive": 5.0, "fused": 1.0}, count=count))
    assert found.verdict == CANNOT_TELL and found.impls == ("fused",)
    text = text_of(statement(found))
    assert "cannot tell" in text and "no interval" in text and f"it needs {MIN_INTERVAL_SAMPLES}" in text


def test_enough_rounds_for_an_interval_give_a_pick() -> None:
    assert pick(one_case({"naive": 5.0, "fused": 1.0}, count=MIN_INTERVAL_SAMPLES)).verdict == WINNER


def test_a_row_that_failed_its_check_is_never_picked() -> None:
    times = rounds({"naive": 2.0, "fused": 1.0})
    records = [row("naive", times["naive"]), row("fused", times["fused"]), row("unscaled", [], status="mismatch")]
    (case,) = cases(records)
    found = pick(case)
    assert found.verdict == WINNER and found.impls == ("fused",)
    assert "`unscaled` failed the correctness check and is not considered" in text_of(statement(found))


def test_an_ablation_that_wins_is_flagged_as_a_different_function() -> None:
    text = text_of(statement(pick(one_case({"naive": 2.0, "shared_qk": 1.0}))))
    assert "`shared_qk` wins" in text and "`shared_qk` computes a different function" in text
    assert "different function" not in text_of(statement(pick(one_case({"naive": 2.0, "fused": 1.0}))))


def test_one_row_ok_is_only_and_none_ok_is_nothing() -> None:
    (alone,) = cases([row("fused", samples(1.0, 0.01)), row("naive", [], status="skipped", error="too big")])
    assert pick(alone).verdict == ONLY and "nothing to compare it with" in text_of(statement(pick(alone)))
    (failed,) = cases([row("naive", [], status="oom"), row("fused", [], status="error", error="boom")])
    assert pick(failed).verdict == NOTHING


def test_repeats_that_disagree_cannot_tell() -> None:
    first, second = rounds({"naive": 2.0, "fused": 1.0}), rounds({"naive": 1.0, "fused": 2.0}, seed=1)
    records = [row(impl, times[impl], repeat=repeat) for repeat, times in enumerate((first, second)) for impl in times]
    (case,) = cases(records)
    found = pick(case)
    assert found.verdict == CANNOT_TELL and "repeats disagree" in reason(found)


def test_a_winner_needs_every_other_row_clearly_slower_not_only_the_runner_up() -> None:
    times = rounds({"naive": 1.2, "fused": 1.0}, noise=0.002)
    lucky = [0.9 * times["fused"][0], 5.0, 5.0]  # left after 3 rounds: no interval, one round faster than fused
    (case,) = cases([row("naive", times["naive"]), row("fused", times["fused"]), row("capped", lucky)])
    found = pick(case)
    assert (
        found.verdict == CANNOT_TELL and found.runner_up == "naive" and "`capped` has 3 timed rounds" in reason(found)
    )
    slow = [10 * value for value in times["naive"][:3]]  # every round far behind every round of fused
    (case,) = cases([row("naive", times["naive"]), row("fused", times["fused"]), row("capped", slow)])
    assert pick(case).verdict == WINNER


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"rounds_id": "elsewhere"}, "ratio of medians: not timed in the same rounds"),
        ({"times_ms": None}, "ratio of medians: no raw samples stored"),
    ],
)
def test_an_unpaired_lead_says_why_it_is_unpaired(change: dict[str, Any], said: str) -> None:
    times = rounds({"naive": 2.0, "fused": 1.0})
    (case,) = cases([{**row("naive", times["naive"]), **change}, row("fused", times["fused"])])
    text = text_of(statement(pick(case)))
    assert said in text and "timed round" not in text


def test_a_lead_over_too_few_shared_rounds_says_so_and_a_csv_only_run_says_it_stored_no_samples() -> None:
    times = rounds({"naive": 2.0, "fused": 1.0})
    (case,) = cases([row("naive", times["naive"][: MIN_PAIRED_ROUNDS - 1]), row("fused", times["fused"])])
    assert f"only 2 shared rounds, fewer than the {MIN_PAIRED_ROUNDS} pairing needs" in text_of(statement(pick(case)))
    (csv_only,) = cases([{**row(impl, times[impl]), "times_ms": None} for impl in times])
    found = pick(csv_only)
    assert (
        found.verdict == CANNOT_TELL
        and "stored no raw samples" in reason(found)
        and "1 timed round" not in reason(found)
    )


def test_rows_are_ordered_by_their_samples_so_a_nan_latency_does_not_scramble_the_pick() -> None:
    times = rounds({"naive": 1.1, "per_head": 3.0, "fused": 1.0}, noise=0.002)
    records = [row(impl, times[impl]) for impl in times]
    records[1]["latency_ms"] = math.nan
    (case,) = cases(records)
    found = pick(case)
    assert (found.verdict, found.impls, found.runner_up) == (WINNER, ("fused",), "naive")
    assert found.estimate is not None and found.estimate.ratio == pytest.approx(1.1, 0.01)


def test_an_interval_bound_above_1_never_prints_as_1() -> None:
    assert spelling.interval(1.003, 1.15) == "[1.003–1.150]"
    assert spelling.interval(1.45, 1.48) == "[1.45–1.48]"


# --- crossover -------------------------------------------------------------------------------------


def sweep(medians_by_n: dict[int, dict[str, float]], noise: float = 0.01) -> list[MeasuredCase]:
    records = []
    for seq_len, medians in medians_by_n.items():
        times = rounds(medians, noise=noise, seed=seq_len)
        records += [row(impl, times[impl], seq_len=seq_len) for impl in medians]
    return cases(records)


def test_a_crossover_is_bracketed_by_the_measured_points_either_side() -> None:
    found = sweep(
        {128: {"naive": 1.0, "fused": 1.0}, 512: {"naive": 1.0, "fused": 1.0}, 2048: {"naive": 2, "fused": 1}}
    )
    (change,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert change.rule == "crossover" and change.figures["changes_between"] == [[512, 2048]]
    assert "n = 128 … 512: `fused` and `naive` tied; n = 2048: `fused` wins" in text_of(change)
    assert "between the measured n=512 and n=2048" in text_of(change) and "nothing in between was measured" in text_of(
        change
    )
    assert change.figures["segments"][-1]["impls"] == ["fused"]


def test_no_crossover_says_the_answer_holds_at_every_measured_point() -> None:
    found = sweep({128: {"naive": 2.0, "fused": 1.0}, 512: {"naive": 2.0, "fused": 1.0}})
    (steady,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert steady.rule == "no_crossover" and "`fused` wins" in text_of(steady) and steady.figures["answers"]


def sweep_rounds(counts_by_n: dict[int, tuple[dict[str, float], int]], heads: int = 4) -> list[dict[str, Any]]:
    """Records of a seq_len sweep whose points were timed in these many rounds."""
    records = []
    for seq_len, (medians, count) in counts_by_n.items():
        times = rounds(medians, count=count, seed=seq_len + heads)
        records += [row(impl, times[impl], seq_len=seq_len, heads=heads) for impl in medians]
    return records


def test_a_point_that_cannot_tell_is_a_gap_never_a_crossover() -> None:
    wins, even = {"naive": 2.0, "fused": 1.0}, {"naive": 1.0, "fused": 1.0}
    found = cases(sweep_rounds({128: (wins, 20), 512: (wins, 2), 2048: (wins, 20)}))
    (steady,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert steady.rule == "no_crossover" and "cannot tell at n=512" in text_of(steady)
    found = cases(sweep_rounds({128: (even, 20), 512: (wins, 2), 2048: (wins, 20)}))
    (change,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert change.figures["changes_between"] == [[128, 2048]] and "n = 512: cannot tell (2 rounds)" in text_of(change)


def test_values_are_in_numeric_order_and_json_figures_stay_objects_and_lists() -> None:
    wins, even = {"naive": 2.0, "fused": 1.0}, {"naive": 1.0, "fused": 1.0}
    found = cases(sweep_rounds({1024: (wins, 20), 16384: (wins, 20), 4096: (wins, 20)}))
    (steady,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert steady.figures["values"] == [1024, 4096, 16384]
    found = cases(sweep_rounds({128: (even, 20), 2048: (wins, 20)}) + sweep_rounds({128: (wins, 20)}, heads=8))
    change = next(s for s in crossovers(found, {case.case_id: pick(case) for case in found}) if s.rule == "crossover")
    figures = json.loads(json.dumps(plain(change.figures)))
    assert figures["fixed"] == {"heads": 4} and isinstance(figures["segments"][0], dict)
    assert figures["segments"][0]["values"] == [128]


# --- why -------------------------------------------------------------------------------------------


def with_fields(case: MeasuredCase, impl: str, **fields: Any) -> MeasuredCase:
    """``case`` with these columns set on ``impl``'s row."""
    records = [{**r, **fields} if r["impl"] == impl else dict(r) for r in case.rows]
    (changed,) = cases(records)
    return changed


def test_many_ops_in_a_short_call_are_launch_bound_and_few_are_not() -> None:
    case = one_case({"naive": 0.3, "fused": 1.0})
    latency_ms = case.row("naive")["latency_ms"]
    many = round(LAUNCH_BOUND_SHARE * latency_ms * 1e3 / HOST_US_PER_OP["cpu"]) + 1
    bound = why.launch(with_fields(case, "naive", ops_per_call=many), "naive", "cpu")
    assert bound is not None and bound.rule == "launch" and f"its {many} dispatched ops" in text_of(bound)
    assert why.launch(with_fields(case, "naive", ops_per_call=10), "naive", "cpu") is None


def test_a_cuda_call_whose_host_time_doubles_its_device_time_is_launch_bound() -> None:
    case = one_case({"fused": 1.0, "naive": 2.0})
    latency_ms = case.row("fused")["latency_ms"]
    slow_host = with_fields(case, "fused", ops_per_call=1, host_latency_ms=2 * latency_ms)
    bound = why.launch(slow_host, "fused", "cuda")
    assert bound is not None and "on the host against" in text_of(bound) and "(2×)" in text_of(bound)
    assert why.launch(with_fields(case, "fused", ops_per_call=1, host_latency_ms=latency_ms), "fused", "cuda") is None


def test_roofline_says_memory_bound_below_the_ridge_and_where_the_intensity_came_from() -> None:
    case = one_case({"naive": 2.0, "fused": 1.0})
    naive = case.row("naive")
    efficiency = naive["achieved_tflops"] / naive["attainable_tflops"]

    def at(target: float, **fields: Any) -> MeasuredCase:  # useful FLOPs and bytes scaled together: same intensity
        scale = target / efficiency
        scaled = {"useful_flops": naive["useful_flops"] * scale, "bytes_moved": naive["bytes_moved"] * scale}
        return with_fields(case, "naive", **scaled, **fields)

    modelled = roofline(at(0.9), "naive")
    assert (
        modelled is not None
        and "`naive` is memory-bound" in text_of(modelled)
        and "90.0% of the attainable" in text_of(modelled)
    )
    assert "bytes from the cost model)" in text_of(modelled)
    assert "below the ridge at 25 FLOP/B" in text_of(modelled)  # 0.5 TFLOP/s over 20 GB/s
    counted = roofline(at(0.9, intensity_source="measured", measured_intensity=3.0), "naive")
    assert counted is not None and "3 FLOP/B (all FLOPs executed; bytes counted from the ops that ran)" in text_of(
        counted
    )
    hardware = roofline(at(0.9, intensity_source="hardware", hardware_intensity=12.0), "naive")
    assert hardware is not None and "12 FLOP/B (all FLOPs executed; FLOPs and DRAM bytes from the hardware" in text_of(
        hardware
    )
    assert hardware.figures["bytes_source"] == "hardware"
    far = roofline(at(0.1), "naive")
    assert far is not None and "far from both roofs" in text_of(far) and "-bound" not in text_of(far)
    assert (modelled.figures["bytes_source"], counted.figures["bytes_source"]) == ("model", "counted")


def test_roofline_names_hardware_counters_where_the_intensity_came_from_ncu() -> None:
    """Issue 25: advise called ncu's 948 FLOP/B "bytes cost model"; a hardware intensity is named as such."""
    case = one_case({"naive": 2.0, "fused": 1.0})
    measured = with_fields(case, "fused", intensity_source="hardware", hardware_intensity=948.0, measured_intensity=3.0)
    said = roofline(measured, "fused")
    assert said is not None and "948 FLOP/B (all FLOPs executed; FLOPs and DRAM bytes from the hardware" in text_of(
        said
    )
    assert "cost model" not in text_of(said) and said.figures["bytes_source"] == "hardware"


def test_materialized_scores_are_set_against_the_l2_when_the_manifest_has_one() -> None:
    case = one_case({"naive": 2.0, "fused": 1.0}, seq_len=512)
    scores = 1 * 4 * 512 * 512 * 4  # b·h·n·n float32
    naive = with_fields(case, "naive", attn_bytes=3 * scores)
    known = why.scores(naive, "naive", 2**20)
    assert known is not None and "4 MiB written and read back" in text_of(known) and "4× the 1 MiB L2" in text_of(known)
    unknown = why.scores(naive, "naive", None)
    assert unknown is not None and "a cache of unknown size" in text_of(unknown)
    assert why.scores(with_fields(case, "fused", attn_bytes=scores // 8), "fused", 2**20) is None


def test_what_did_not_fit_is_named_with_its_reason() -> None:
    times = rounds({"naive": 2.0, "fused": 1.0})
    failed = [
        row("per_head", [], status="oom", error="CUDA out of memory"),
        row("naive", [], status="skipped", error="predicted 9 GB > available 1 GB"),
    ]
    (case,) = cases([row("fused", times["fused"]), *failed])
    found = why.did_not_fit(case)
    assert found is not None and "`naive` skipped (predicted 9 GB > available 1 GB)" in text_of(found)
    assert "`per_head` oom" in text_of(found) and {one["impl"] for one in found.figures["failed"]} == {
        "naive",
        "per_head",
    }


def test_peak_memory_is_set_against_the_runner_up() -> None:
    case = one_case({"naive": 2.0, "fused": 1.0})
    found = why.memory(
        with_fields(with_fields(case, "fused", peak_memory_bytes=2**20), "naive", peak_memory_bytes=2**24),
        "fused",
        "naive",
    )
    assert found is not None and "`fused` peaks at 1 MiB per call against `naive`'s 16 MiB: 16× less" in text_of(found)


# --- what to change --------------------------------------------------------------------------------


def test_a_faster_head_count_at_the_same_width_is_named_with_both_rows() -> None:
    records = []
    for heads, median_ms in ((2, 1.0), (4, 1.5), (8, 2.0)):
        records += [row("fused", samples(median_ms, 0.01, count=12, seed=heads), heads=heads)]
    (found,) = changes(cases(records))
    assert found.rule == "heads_change" and found.figures["fastest_value"] == 2
    assert text_of(found).startswith("At d=64") and "h=2 (d_k=32) with `fused` is the fastest" in text_of(found)
    assert len(found.figures["points"]) == 3 and "Another head count (so head size) is another model" in text_of(found)


def test_fewer_key_value_heads_at_decode_name_their_kv_cache() -> None:
    records = []
    for kv_heads, median_ms, cache_bytes in ((2, 1.0, 2**17), (8, 1.5, 2**19)):
        times = samples(median_ms, 0.01, count=12, seed=kv_heads)
        record = row("fused", times, heads=8, seq_len=128)
        case_id = f"{record['case_id']}-kv{kv_heads}-decode"
        records.append(
            {**record, "kv_heads": kv_heads, "phase": "decode", "kv_cache_bytes": cache_bytes, "case_id": case_id}
        )
    (found,) = changes(cases(records))
    assert found.rule == "kv_heads_change" and "(decode: the KV cache each reads), kv=2 (KV cache 128 KiB)" in text_of(
        found
    )
    assert "kv=8 (KV cache 512 KiB) with `fused` 1.5" in text_of(found)


def test_heads_that_cannot_be_told_apart_are_no_clear_difference() -> None:
    records = [row("fused", samples(1.0, 0.05, count=12, seed=heads), heads=heads) for heads in (2, 4)]
    (found,) = changes(cases(records))
    assert "no clear difference" in text_of(found)


def test_a_head_count_with_no_interval_cannot_tell_rather_than_tied() -> None:
    records = [row("fused", samples(1.0, 0.01, count=12, seed=2), heads=2)]
    records += [row("fused", samples(1.02, 0.05, count=2, seed=4), heads=4)]  # 2 rounds, within reach
    (found,) = changes(cases(records))
    assert "(no interval: cannot tell)" in text_of(found) and "(tied)" not in text_of(found)
    assert sorted(point["standing"] for point in found.figures["points"]) == [CANNOT_TELL, "fastest"]


# --- caveats ---------------------------------------------------------------------------------------


def caveat_rules(
    case_list: list[MeasuredCase], manifest: dict[str, Any], question: Question | None = None
) -> dict[str, str]:
    picks = {case.case_id: pick(case) for case in case_list}
    typed = Manifest.model_validate(manifest)
    return {s.rule: text_of(s) for s in caveats("run", typed, case_list, picks, question or Question())}


def test_a_cpu_run_asked_about_a_gpu_says_it_cannot_tell() -> None:
    manifest = {"environment": {"device_kind": "cpu", "device_name": "Test CPU"}, "status": "complete"}
    found = caveat_rules([one_case({"naive": 2.0, "fused": 1.0})], manifest, Question(device_kind="cuda"))
    assert "asked about cuda, but this run was measured on cpu" in found["other_device"]
    assert "other_device" not in caveat_rules([one_case({"naive": 2.0})], manifest, Question(device_kind="cpu"))


def test_missing_implementations_noisy_rows_drift_and_an_unfinished_run_are_caveats() -> None:
    manifest = {
        "status": "interrupted",
        "drift": {"workload": "512×512 float32 matmul on cpu", "drift": 0.25, "exceeded": True},
    }
    case_list = [one_case({"naive": 1.0, "fused": 1.0}, noise=0.3), one_case({"naive": 5.0, "fused": 1.0}, count=2)]
    found = caveat_rules(case_list, manifest, Question(impls=("flash_attn", "fused")))
    assert "`flash_attn` was not measured" in found["not_measured"] and "`fused` was" not in found["not_measured"]
    assert "moved by 25 %" in found["drift"] and "interrupted" in found["unfinished"]
    assert "noisy" in found["noisy"] and "cannot be told apart" in found["no_interval"]
    capped = with_fields(one_case({"naive": 2.0, "fused": 1.0}), "naive", capped=True)
    assert "1 ok row(s) spent max_run_time_s" in caveat_rules([capped], {})["capped"]


def test_winners_of_one_process_get_one_caveat_whatever_their_lead() -> None:
    """No fixed margin: on a machine with no calibration a small and a large win are named by the same one
    sentence (tests/test_calibration.py has the calibrated side)."""
    close = one_case({"naive": 1.05, "fused": 1.0}, noise=0.001)
    clear = one_case({"naive": 2.0, "fused": 1.0}, seq_len=256)
    assert pick(close).verdict == pick(clear).verdict == WINNER
    found = caveat_rules([close, clear], {})
    assert "one_process" not in found and "2 pick(s) rest on one process" in found["uncalibrated"]
    assert found["uncalibrated"].index(close.label) < found["uncalibrated"].index(clear.label)


def test_rows_that_did_not_run_for_other_reasons_are_counted_per_implementation() -> None:
    times = rounds({"naive": 2.0, "fused": 1.0})
    (case,) = cases([row(i, times[i]) for i in times] + [row("torch_mha", [], status="unsupported", error="no GQA")])
    assert "`torch_mha` is unsupported in 1 case(s)" in caveat_rules([case], {})["did_not_run"]


# --- a whole run, and across runs ------------------------------------------------------------------


def test_an_unknown_device_kind_is_an_input_error(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "r", [row("fused", samples(1.0, 0.01))]))
    with pytest.raises(InputError, match="--for"):
        advise([run], Question(device_kind="tpu"))


def test_across_runs_says_where_the_pick_differs_and_by_how_much(tmp_path: Path) -> None:
    fast = rounds({"naive": 2.0, "fused": 1.0})
    tied = rounds({"naive": 1.0, "fused": 1.0}, noise=0.05, seed=3)
    gpu = load_run(write_run(tmp_path, "gpu", [row(i, fast[i]) for i in fast], device_name="Big GPU"))
    cpu = load_run(write_run(tmp_path, "cpu", [row(i, tied[i]) for i in tied], device_name="Small CPU"))
    statements = advise([gpu, cpu]).across
    found = {s.rule: s for s in statements}
    assert "device_name Big GPU → Small CPU" in text_of(found["differences"])
    differs = found["pick_differs"]
    assert "the pick differs between runs: `fused` wins, 2.0" in text_of(differs) and "over `naive` in gpu;" in text_of(
        differs
    )
    assert "`fused` and `naive` tied" in text_of(differs) and text_of(differs).endswith(" in cpu.")
    assert "same_pick" not in found and "no_common_case" not in found
    other_shape = load_run(write_run(tmp_path, "wide", [row(i, fast[i], d_model=128) for i in fast]))
    assert {s.rule for s in advise([gpu, gpu, other_shape]).across} >= {"no_common_case"}
    assert "same_pick" in {s.rule for s in advise([gpu, gpu]).across}
    answers = [text_of(s) for s in statements if s.rule == "run_answer"]
    assert answers[0] == "gpu on Big GPU (torch 2.13.0): `fused` wins in 1 of 1 cases."
    assert {one["run_id"] for one in differs.figures["answers"]} == {"gpu", "cpu"}


def test_across_runs_match_cases_on_their_dtype_and_on_the_shape_only_when_each_run_has_one(tmp_path: Path) -> None:
    fast, slow = rounds({"naive": 2.0, "fused": 1.0}), rounds({"naive": 1.0, "fused": 2.0})
    both = [row(i, fast[i], dtype="float16") for i in fast] + [row(i, slow[i], dtype="bfloat16") for i in slow]
    first, second = (load_run(write_run(tmp_path, name, both)) for name in ("a", "b"))
    found = {s.rule: s for s in advise([first, second]).across}
    assert "pick_differs" not in found and found["same_pick"].figures["matched"] == 2
    half = load_run(write_run(tmp_path, "half", [row(i, fast[i], dtype="float16") for i in fast]))
    other = load_run(write_run(tmp_path, "other", [row(i, fast[i], dtype="bfloat16") for i in fast]))
    same = {s.rule: s for s in advise([half, other]).across}["same_pick"]
    assert same.figures["matched"] == 1 and "the shape fields alone: each run has one dtype" in text_of(same)


def test_a_lower_precision_winner_is_quoted_with_its_error_beside_the_others() -> None:
    """fused_fp8 computes the same function in e4m3: a pick that names it quotes every ok row's max_rel_err, so the
    speed is read beside the error it costs."""
    times = rounds({"fused": 2.0, "fused_fp8": 1.0})
    records = [
        {**row("fused", times["fused"], dtype="bfloat16"), "max_rel_err": 0.004},
        {**row("fused_fp8", times["fused_fp8"], dtype="bfloat16"), "max_rel_err": 0.081},
    ]
    (case,) = cases(records)
    text = text_of(statement(pick(case)))
    assert "`fused_fp8` wins" in text
    assert (
        "`fused_fp8` computes in float8_e4m3fn, with a larger error (max_rel_err `fused` 0.004; `fused_fp8` 0.081)"
        in text
    )
    assert "float8" not in text_of(statement(pick(one_case({"naive": 2.0, "fused": 1.0}))))


# --- issue 29: crossovers only along ordered settings, and not for a tie whose members shift ---------


def test_a_yes_no_setting_gets_the_answer_per_setting_never_a_crossover() -> None:
    """Issue 29: "nothing in between was measured" was said of packed vs padded, a yes/no setting."""
    records = []
    for causal, medians in ((False, {"naive": 1.0, "fused": 1.0}), (True, {"naive": 2.0, "fused": 1.0})):
        times = rounds(medians, seed=int(causal))
        records += [row(impl, times[impl]) | {"causal": causal, "case_id": f"s/c{causal}"} for impl in medians]
    found = cases(records)
    (by_setting,) = crossovers(found, {case.case_id: pick(case) for case in found})
    assert by_setting.rule == "by_setting" and by_setting.kind == "crossover"
    assert "between" not in text_of(by_setting) and "nothing in between" not in text_of(by_setting)
    assert text_of(by_setting).startswith("by causal") and "`fused` wins" in text_of(by_setting)


def test_a_tie_whose_members_shift_is_not_a_crossover() -> None:
    """Issue 29: "the answer changes between n=64 and n=256" when only the membership of a 5-way tie shifted."""
    five = {"naive": 1.0, "fused": 1.0, "flex": 1.0, "per_head": 1.0, "torch_mha": 1.0}
    four = {**five, "torch_mha": 3.0}
    found = sweep({64: five, 256: four})
    picks = {case.case_id: pick(case) for case in found}
    assert [picks[case.case_id].verdict for case in found] == [TIED, TIED]
    assert {len(picks[case.case_id].impls) for case in found} == {4, 5}
    (steady,) = crossovers(found, picks)
    assert steady.rule == "no_crossover" and "changes between" not in text_of(steady)
