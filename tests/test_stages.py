"""The breakdown by stage (docs/stages.md): the model per stage, the attribution rules, explain's rules, the
recorded H100 run, and a CPU profile of torch_mha's per-token GEMM."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from shared_runs import recorded

import mhabench.impls  # noqa: F401  (registers every implementation)
import mhabench.measure.stages as stages_module
from mhabench.analysis.advice.advise import advise
from mhabench.analysis.explain.explain import explain
from mhabench.analysis.explain.rules import departs, first_match
from mhabench.answers_on_disk import advise_folders
from mhabench.cost import Workload
from mhabench.impls.registry import available_implementations, build, get_spec
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.stages import (
    ProfiledCall,
    ProfiledOp,
    Unit,
    assign_stages,
    breakdown,
    kind_of,
    op_tree,
    profile_cpu,
)
from mhabench.pattern import CAUSAL
from mhabench.results.kernels import read_kernels
from mhabench.results.stages import StageFigures, breakdown_group, read_breakdown
from mhabench.results.store import load_run
from mhabench.run import runner
from mhabench.run.request import RunRequest
from mhabench.scenario.loading import parse_config
from mhabench.stage_cost import stage_costs
from mhabench.views import explain as explain_view
from mhabench.views.explain import sentence as explanation
from mhabench.views.report.blocks import Heading, Plot
from mhabench.views.report.hardware_gaps import hardware_gaps
from mhabench.views.report.kernels import kernel_blocks
from mhabench.views.stage_plot import stage_blocks
from mhabench.views.table import TableModel
from mhabench.views.wording import sentence as text_of

COUNTERS_RUN_ID = "20261127T074353Z-default-gpu-counters-partial"
"""The recorded H100 run with Nsight Compute counters (torch_mha's 8× projection kernel), in shared/runs."""
WORKLOADS = [
    Workload(2, 64, 64, 128, 4, 4, 32, 4),
    Workload(1, 64, 64, 128, 4, 2, 32, 2, CAUSAL),
    Workload(1, 64, 64, 128, 4, 4, 32, 4, CAUSAL, train=True),
]


@pytest.fixture
def counters_run() -> Path:
    """The counters run inside the checkout or beside it; skipped, saying so, where it is not."""
    return recorded(COUNTERS_RUN_ID)


@pytest.mark.parametrize("workload", WORKLOADS, ids=["plain", "gqa-causal", "train"])
def test_the_stages_of_every_registered_model_add_up_to_its_flops_and_bytes(workload: Workload) -> None:
    for name in available_implementations():
        model = get_spec(name).cost
        if model is None or (name == "full_dim_heads" and workload.kv_heads != workload.heads):
            continue
        stages, cost = stage_costs(model, workload), model(workload)
        assert sum(s.flops for s in stages.values()) == cost.flops, name
        assert abs(sum(s.bytes_moved for s in stages.values()) - cost.bytes_moved) <= 2, name
        assert all(s.flops >= 0 and s.bytes_moved >= 0 for s in stages.values()), name


def test_fused_prices_one_packed_qkv_gemm_and_one_attention_kernel() -> None:
    w = WORKLOADS[0]
    stages = stage_costs(get_spec("fused").cost, w)
    assert stages["qkv_projection"].flops == 2 * w.tokens * w.d_model * 3 * w.d_model
    assert stages["out_projection"].flops == 2 * w.tokens * w.d_model * w.d_model
    assert "scores" not in stages and stages["attention"].flops == 4 * w.score_elements * w.head_dim


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("aten::bmm", "gemm"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aten::_masked_softmax", "softmax"),
        ("nvjet_sm90_tst_512x8_64x3_2x1_v_bz_TNT", "gemm"),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "attention"),
        ("void native::triu_tril_kernel<bool, int, 1, 8, 0>", "mask"),
        ("void native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>", "copy"),
        ("aten::view", "other"),
    ],
)
def test_an_op_or_kernel_gets_its_kind_from_its_name(name: str, kind: str) -> None:
    assert kind_of(name) == kind


def test_gemms_get_their_stage_from_their_order() -> None:
    materialized = ["gemm", "gemm", "gemm", "gemm", "elementwise", "mask", "softmax", "gemm", "copy", "gemm"]
    assert assign_stages(materialized) == [
        "qkv_projection",
        "qkv_projection",
        "qkv_projection",
        "scores",
        "mask_softmax",
        "mask_softmax",
        "mask_softmax",
        "pv",
        "layout",
        "out_projection",
    ]
    assert assign_stages(["mask", "gemm", "copy", "attention", "gemm"]) == [
        "mask_softmax",
        "qkv_projection",
        "layout",
        "attention",
        "out_projection",
    ]


def test_the_call_time_no_unit_covers_is_other_and_a_missing_counter_leaves_the_stage_uncounted() -> None:
    units = [Unit("aten::mm", "gemm", 3.0, 10.0, 20.0), Unit("k", "attention", 1.0), Unit("aten::mm", "gemm", 1.0)]
    figures = {f.stage: f for f in breakdown(units, None, total_ms=10.0)}
    assert figures["qkv_projection"].time_share == pytest.approx(0.3)
    assert figures["other"].time_ms == pytest.approx(5.0)
    assert figures["attention"].flops is None
    group = breakdown_group(list(figures.values()), "profiler")
    assert group.top_stage == "other" and read_breakdown(group.stage_breakdown) == list(figures.values())


def _stage(
    stage: str = "qkv_projection", top_op: str = "aten::mm [[64,64],[64,192]]", **figures: float
) -> StageFigures:
    base = StageFigures(stage, 9.0, 0.9, 100.0, 100.0, 100.0, 100.0, 1, top_op, 1)
    return dataclasses.replace(base, **figures)


def test_rule_per_token_gemm_reads_the_bmm_shapes() -> None:
    rule, found = first_match(_stage(top_op="aten::bmm [[1024,1,4096],[1024,4096,12288]]"))  # type: ignore[misc]
    assert rule.name == "per_token_gemm" and found["batch"] == 1024
    assert "1,024 batched GEMMs of 1 row(s) each" in explain_view.RULES[rule.name].format(**found)
    assert first_match(_stage(top_op="aten::bmm [[4,64,16],[4,16,64]]")) is None  # heads, not tokens


def test_rule_padded_gemm_needs_the_executed_flops_above_the_model() -> None:
    kernel = "nvjet_sm90_tst_512x8_64x3_2x1_v_bz_TNT"
    matched = first_match(_stage(top_op=kernel, flops=800.0))
    assert matched is not None and matched[0].name == "padded_gemm"
    assert first_match(_stage(top_op=kernel, flops=110.0)) is None


def test_rule_many_small_ops_counts_one_op_per_head() -> None:
    matched = first_match(_stage(stage="pv", top_op="aten::bmm [[1,64,64],[1,64,16]]", top_op_count=32, ops=32))
    assert matched is not None and matched[0].name == "many_small_ops"


def test_a_departure_no_rule_knows_is_still_a_departure() -> None:
    unknown = _stage(stage="layout", top_op="aten::clone [[8,64]]", bytes_moved=400.0)
    assert first_match(unknown) is None and departs(unknown)
    assert not departs(_stage())


def test_explain_on_the_recorded_h100_run_names_torch_mha_projection_kernel_and_8x_flops(counters_run: Path) -> None:
    found = [e for e in explain(load_run(counters_run)) if e.impl == "torch_mha"]
    assert len(found) == 4  # every case of the partial run
    for one in found:
        assert one.pick == "fused" and one.source == "counters" and one.rule == "padded_gemm"
        assert one.stage is not None and one.stage.stage == "qkv_projection"
        assert one.stage.flops_ratio == pytest.approx(8.0, rel=0.01)
        said = explanation(one)
        assert "nvjet_sm90_tst_512x8_64x3_2x1_v_bz_TNT" in said and "8.0× the model's FLOPs" in said
    by_label = explain(load_run(counters_run), cases=("n=1024 h=32 d=4096 b=1 bfloat16",), impls=("torch_mha",))
    by_id = explain(load_run(counters_run), cases=("d4096-h32/b1-n1024-d4096-h32-bfloat16",), impls=("torch_mha",))
    assert [e.case_id for e in by_label] == [e.case_id for e in by_id] == ["d4096-h32/b1-n1024-d4096-h32-bfloat16"]


@pytest.mark.parametrize("name", ["naive", "shared_qk", "per_head"])
def test_our_materialized_layers_projections_land_in_their_stages(name: str) -> None:
    """The order rules need our own layers to project before their scores (shared_qk once projected V after)."""
    module, x = build(name, AttentionWeights.random(64), 4), torch.randn(2, 32, 64)
    with torch.inference_mode():
        module(x)
        units, wall_ms = profile_cpu(lambda: module(x), 4)
    model = stage_costs(get_spec(name).cost, Workload(2, 32, 32, 64, 4, 4, 16, 4))
    figures = {f.stage: f for f in breakdown(units, model, wall_ms)}
    for stage in ("qkv_projection", "scores", "pv", "out_projection"):
        assert figures[stage].flops_ratio == pytest.approx(1.0), stage


def _fake_profiles(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[float, float]]) -> list[float]:
    """``_profile_cpu_once`` replaced by calls of the given (wall, thread CPU) milliseconds; the walls profiled."""
    import mhabench.measure.stages as stage_module

    profiled: list[float] = []
    found = iter(calls)

    def once(call: object) -> ProfiledCall:
        wall_ms, thread_ms = next(found)
        profiled.append(wall_ms)
        return ProfiledCall([], wall_ms, thread_ms)

    monkeypatch.setattr(stage_module, "_profile_cpu_once", once)
    return profiled


def test_one_profiled_call_is_enough_when_nothing_preempted_it(monkeypatch: pytest.MonkeyPatch) -> None:
    profiled = _fake_profiles(monkeypatch, [(10.0, 9.5), (99.0, 99.0)])
    assert profile_cpu(lambda: None, 4) == ([], 10.0) and profiled == [10.0]


def test_the_cpu_breakdown_keeps_the_profiled_call_of_median_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # the first call preempted (its thread ran 2 of its 30 ms): its idle time would all be "other"
    profiled = _fake_profiles(monkeypatch, [(30.0, 2.0), (1.0, 1.0), (10.0, 10.0)])
    assert profile_cpu(lambda: None, 4) == ([], 10.0) and profiled == [30.0, 1.0, 10.0]


def test_two_profiled_calls_that_agree_are_enough_and_the_faster_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    profiled = _fake_profiles(monkeypatch, [(11.0, 5.0), (10.0, 5.0), (99.0, 99.0)])
    assert profile_cpu(lambda: None, 4) == ([], 10.0) and profiled == [11.0, 10.0]  # no third call
    profiled = _fake_profiles(monkeypatch, [(10.0, 5.0), (14.0, 5.0), (12.0, 5.0)])  # 40 % apart: a third call
    assert profile_cpu(lambda: None, 4) == ([], 12.0) and profiled == [10.0, 14.0, 12.0]


@pytest.mark.parametrize("name", ["naive", "per_head", "fused", "torch_mha", "torch_mha_fast"])
def test_the_op_tree_is_the_tree_torch_event_list_builds(name: str) -> None:
    """The breakdown reads the profiler's raw events; torch's own event objects must give the same ops and times."""
    module, x = build(name, AttentionWeights.random(32), 4), torch.randn(2, 16, 32)
    with torch.inference_mode():
        module(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profiler:
            module(x)

    def theirs(event: Any) -> tuple[object, ...]:
        children = sorted(event.cpu_children, key=lambda child: child.time_range.start)
        own = (event.name, [list(shape) for shape in event.input_shapes], event.cpu_time_total / 1e3)
        return (*own, [theirs(child) for child in children])

    def ours(op: ProfiledOp) -> tuple[object, ...]:
        return (op.name, [list(shape) for shape in op.shapes], op.time_ms, [ours(child) for child in op.children])

    roots = sorted((e for e in profiler.events() if e.cpu_parent is None), key=lambda e: e.time_range.start)
    tree = op_tree(profiler.profiler.kineto_results.events())
    assert len(tree) > 0
    assert _rounded([ours(op) for op in tree]) == _rounded([theirs(event) for event in roots])


def test_a_profiled_call_has_the_ops_torch_profiler_records_without_its_wrapper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The breakdown profiles with the autograd profiler that ``torch.profiler.profile`` wraps (whose start imports
    Inductor): the same ops and shapes as the wrapper records, and the wrapper never entered."""
    module, x = build("fused", AttentionWeights.random(32), 4), torch.randn(2, 16, 32)

    def shapes(ops: list[ProfiledOp]) -> list[object]:
        return [(op.name, [list(shape) for shape in op.shapes], shapes(op.children)) for op in ops]

    with torch.inference_mode():
        module(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as profiler:
            module(x)
        wrapped = op_tree(profiler.profiler.kineto_results.events())
        monkeypatch.setattr(torch.profiler, "profile", None)  # calling it now would raise
        ours = stages_module._profile_cpu_once(lambda: module(x))
    assert len(ours.ops) > 0 and shapes(ours.ops) == shapes(wrapped)


def _rounded(tree: object) -> object:
    """Times to the nanosecond: torch's event objects keep them as float microseconds."""
    if isinstance(tree, float):
        return round(tree, 6)
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rounded(item) for item in tree)
    return tree


def test_the_cpu_profile_shows_torch_mha_per_token_bmm_on_a_small_case() -> None:
    weights, tokens = AttentionWeights.random(64), 32
    module = build("torch_mha", weights, 4)
    x = torch.randn(1, tokens, 64)
    with torch.inference_mode():
        module(x)
        units, wall_ms = profile_cpu(lambda: module(x), 4)
    model = stage_costs(get_spec("torch_mha").cost, Workload(1, tokens, tokens, 64, 4, 4, 16, 4))
    qkv = {f.stage: f for f in breakdown(units, model, wall_ms)}["qkv_projection"]
    assert qkv.top_op == f"aten::bmm [[{tokens},1,64],[{tokens},64,192]]"
    assert qkv.flops_ratio == pytest.approx(1.0)  # the CPU runs the model's FLOPs, one token at a time
    assert qkv.bytes_ratio is not None and qkv.bytes_ratio > 10  # the weight read once per token
    matched = first_match(qkv)
    assert matched is not None and matched[0].name == "per_token_gemm" and matched[1]["batch"] == tokens


def test_torch_mha_fast_takes_the_native_path_and_one_qkv_gemm() -> None:
    weights = AttentionWeights.random(64)
    module = build("torch_mha_fast", weights, 4)
    x = torch.randn(1, 32, 64)
    with torch.inference_mode():
        units, _ = profile_cpu(lambda: module(x), 4)
    names = [unit.label for unit in units]
    assert "aten::mm [[32,64],[64,192]]" in names and not any(n.startswith("aten::bmm [[32,1,") for n in names)


def test_a_cpu_run_stores_every_ok_row_breakdown_and_explain_reads_it(
    tiny_config_data: dict[str, Any], fixed_peaks: object, tmp_path: Path
) -> None:
    data = {**tiny_config_data, "implementations": ["fused", "torch_mha"]}
    data["scenarios"] = [{**data["scenarios"][0], "bias": False}]
    result = runner.run(
        parse_config(data, "tiny.yaml"), tmp_path, request=RunRequest(argv=("mhabench", "run", "tiny.yaml"))
    )
    rows = load_run(result.run_dir).frame
    assert set(rows["breakdown_source"]) == {"profiler"}
    torch_mha = rows[rows["impl"] == "torch_mha"].iloc[0]
    stages = {figure.stage: figure for figure in read_breakdown(torch_mha["stage_breakdown"])}
    assert stages["qkv_projection"].top_op.startswith("aten::bmm [[9,2,16],[9,16,48]]")  # seq_len 9, batch 2
    fused = {
        figure.stage: figure for figure in read_breakdown(rows[rows["impl"] == "fused"].iloc[0]["stage_breakdown"])
    }
    assert fused["qkv_projection"].flops_ratio == pytest.approx(1.0) and "attention" in fused
    label = str(rows.iloc[0]["case_id"])
    assert explain(load_run(result.run_dir), cases=(label,), impls=("torch_mha",)) is not None  # known: no error
    from typer.testing import CliRunner

    from mhabench.cli import app

    for option, value in (("--case", "t/b9-nope"), ("--impl", "torch_mha_typo")):
        done = CliRunner().invoke(app, ["explain", str(result.run_dir), option, value])
        assert done.exit_code == 2 and "Traceback" not in done.output, done.output
        assert done.output.count("\n") == 1 and option in done.output and value in done.output


def test_every_kernel_table_of_the_report_is_labelled_with_its_case_and_implementation(counters_run: Path) -> None:
    blocks = kernel_blocks(load_run(counters_run), 1)
    tables = [i for i, block in enumerate(blocks) if isinstance(block, TableModel)]
    assert len(tables) == 16
    labels = [blocks[i - 1] for i in tables]
    assert all(isinstance(label, Heading) and label.level == 3 for label in labels)
    assert "d4096-h32/b1-n1024-d4096-h32-bfloat16: torch_mha" in [label.text for label in labels]  # type: ignore[union-attr]


def test_the_report_draws_model_and_measured_stages_for_the_recorded_run(counters_run: Path) -> None:
    blocks = stage_blocks(load_run(counters_run))
    assert isinstance(blocks[0], Heading) and blocks[0].text == "Stages"
    plots = [block for block in blocks if isinstance(block, Plot)]
    assert len(plots) == 4 and all(plot.png for plot in plots)


def test_a_case_with_several_repeats_draws_each_implementation_once(counters_run: Path) -> None:
    """A replicated run repeats every row per process: the stacked bars take the first repeat, not all of them."""
    from mhabench.views import stage_plot

    run = load_run(counters_run)
    case_id = run.frame["case_id"].iloc[0]
    one = run.frame[run.frame["case_id"] == case_id]
    twice = pd.concat([one, one.assign(repeat=1)], ignore_index=True)
    bars = stage_plot._bars(twice, read_kernels(counters_run))
    assert sorted(impl for impl, _, _ in bars) == sorted(one[one["status"] == "ok"]["impl"])


def test_model_disagreements_include_the_hardware_figures(counters_run: Path) -> None:
    gaps = hardware_gaps(load_run(counters_run).frame)
    torch_mha = gaps[gaps["impl"] == "torch_mha"]
    assert len(torch_mha) == 4 and (torch_mha["bytes_ratio"] > 250).all() and (torch_mha["flops_ratio"] > 4).all()
    assert "naive" not in set(gaps["impl"])  # its DRAM bytes and FLOPs are within 25 % of its model


def test_a_cuda_breakdown_without_counters_takes_kernel_names_and_durations_in_launch_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fake profiler modelled on the recorded run's torch_mha kernels: names, device times (µs), launch order."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from mhabench.measure import stages as stage_module

    launched = [
        ("nvjet_sm90_tst_512x8_64x3_2x1_v_bz_TNT", 22527.0),
        ("void native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>", 33.0),
        ("Memcpy DtoD (Device -> Device)", 5.0),
        ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", 33.0),
        ("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 45.0),
    ]
    events = [
        SimpleNamespace(name=name, device_type=DeviceType.CUDA, device_time=us, time_range=SimpleNamespace(start=i))
        for i, (name, us) in reversed(list(enumerate(launched)))
    ]

    class FakeProfile:
        def __init__(self, **_: object) -> None: ...
        def __enter__(self) -> FakeProfile:
            return self

        def __exit__(self, *_: object) -> None: ...
        def events(self) -> list[SimpleNamespace]:
            return events

    monkeypatch.setattr(stage_module.torch.cuda, "synchronize", lambda device: None)
    monkeypatch.setattr(stage_module.torch.profiler, "profile", FakeProfile)
    units = stage_module.profile_cuda(lambda: None, torch.device("cuda"))
    assert [unit.kind for unit in units] == ["gemm", "copy", "attention", "gemm"]  # the memcpy is no kernel
    figures = {f.stage: f for f in breakdown(units, None)}
    assert figures["qkv_projection"].time_ms == pytest.approx(22.527) and figures["qkv_projection"].flops is None
    assert set(figures) == {"qkv_projection", "layout", "attention", "out_projection"}


def test_explain_command_json_and_bad_input(counters_run: Path) -> None:
    from typer.testing import CliRunner

    from mhabench.cli import app

    cli = CliRunner()
    done = cli.invoke(app, ["explain", str(counters_run), "--impl", "torch_mha", "--format", "json"])
    assert done.exit_code == 0, done.output
    records = json.loads(done.stdout)
    assert {r["rule"] for r in records} == {"padded_gemm"} and {r["stage"]["stage"] for r in records} == {
        "qkv_projection"
    }
    refused = cli.invoke(app, ["explain", str(counters_run), "--format", "pdf"])
    assert refused.exit_code == 2 and "--format" in refused.output and "Traceback" not in refused.output


def test_advise_cites_explain_in_one_line_per_clearly_slower_implementation(counters_run: Path) -> None:
    run = load_run(counters_run)
    cited = [s for s in advise_folders([run]).statements if s.rule == "explained"]
    slower = [e for e in explain(run)]
    assert len(cited) == len(slower) == 11  # per_head and torch_mha in 4 cases, naive in 3
    torch_mha = [s for s in cited if s.impl == "torch_mha"]
    assert all("QKV projection" in text_of(s) and "8.0× the model's FLOPs" in text_of(s) for s in torch_mha)
    assert all(f"mhabench explain {run.run_id} --impl torch_mha" in text_of(s) for s in torch_mha)
    assert all("\n" not in text_of(s) for s in cited)


def test_a_train_step_gets_no_breakdown_and_says_why(tiny_config_data: dict[str, Any]) -> None:
    from mhabench.run.breakdown import TRAIN_STEP, profiled_breakdown
    from mhabench.scenario.cases import expand_cases

    (case,) = expand_cases(parse_config(tiny_config_data, "tiny.yaml"), torch.device("cpu"))
    train = dataclasses.replace(case, mode="train")
    called: list[int] = []
    group = profiled_breakdown(lambda: called.append(1), get_spec("fused"), train, torch.device("cpu"))
    assert group.breakdown_source == TRAIN_STEP and group.stage_breakdown is None and not called


def test_explain_on_a_run_older_than_breakdowns_says_so_for_each_slower_row(h100_run: Path) -> None:
    found = explain(load_run(h100_run))  # format 4, no breakdown column, no kernels.csv
    assert found and all(e.stage is None and "a run older than breakdowns" in explanation(e) for e in found)
    assert all("(none:" not in explanation(e) for e in found)


def test_every_figure_advise_quotes_of_a_row_is_the_one_the_results_table_shows(counters_run: Path) -> None:
    from mhabench.analysis.speedup import speedup_rows
    from mhabench.views.summary import results_table

    run = load_run(counters_run)
    table = results_table(speedup_rows(run.frame, "naive"))
    cells = {
        (str(record["case_id"]), str(record["impl"])): dict(zip(table.headers, line, strict=True))
        for (_, record), line in zip(table.records.iterrows(), table.cells, strict=True)  # type: ignore[union-attr]
    }
    from mhabench.views.advice import statements

    advice = advise([run]).runs[0]
    case_ids = {case.label: case.case_id for case in advice.record.cases}
    quoted = [s for s in statements(advice) if s.rule == "roofline"]
    assert quoted
    for statement in quoted:
        shown = cells[(case_ids[statement.scope], statement.impl)]
        for header in ("FLOP/B", "useful TFLOP/s", "roofline eff.", "executed ×"):
            assert f"{shown[header]}" in text_of(statement), (header, shown[header], text_of(statement))


@pytest.mark.parametrize(
    "shapes", [[], [[]], [[2, 16, 32]], [[2, 16, 32], [], [96, 32]], [[9, 2, 16], [9, 16, 48], [1]], [[], []]]
)
def test_an_ops_shape_label_is_its_non_empty_shapes_without_spaces(shapes: list[list[int]]) -> None:
    import re

    assert stages_module.shapes_text(shapes) == re.sub(r"\s+", "", str([shape for shape in shapes if shape]))


def _case_calls(names: list[str]) -> tuple[Any, list[tuple[Any, Any]]]:
    """A small case and each implementation's warm call on it."""
    from mhabench.run.inputs import make_inputs
    from mhabench.run.steps import prepare
    from mhabench.scenario.cases import expand_cases

    data = {
        "name": "s",
        "device": "cpu",
        "scenarios": [{"name": "s", "batch": 2, "seq_len": 16, "d_model": 32, "heads": 4, "causal": True}],
    }
    (case,) = expand_cases(parse_config(data, "s.yaml"), torch.device("cpu"))
    inputs = make_inputs(case, torch.device("cpu"))
    calls = []
    for name in names:
        spec = get_spec(name)
        step = prepare(spec, case, inputs.weights, inputs.x)[1]
        with torch.inference_mode():
            step.run()
        calls.append((step.run, spec))
    return case, calls


def _counted(group: Any) -> list[tuple[object, ...]]:
    """A breakdown's figures that do not depend on timing: per stage its ops, FLOPs, bytes and the model's."""
    return [
        (f.stage, f.ops, f.flops, f.bytes_moved, f.model_flops, f.model_bytes)
        for f in read_breakdown(group.stage_breakdown)
    ]


def test_a_cases_calls_profiled_in_one_session_give_each_row_the_breakdown_it_gets_alone() -> None:
    from mhabench.run.breakdown import profiled_breakdown, profiled_breakdowns

    names = ["naive", "per_head", "fused", "torch_mha", "torch_mha_fast"]
    case, calls = _case_calls(names)
    cpu = torch.device("cpu")
    shared = profiled_breakdowns(calls, case, cpu)
    alone = [profiled_breakdown(call, spec, case, cpu) for call, spec in calls]
    assert [group.breakdown_source for group in shared] == ["profiler"] * len(names)
    assert [_counted(group) for group in shared] == [_counted(group) for group in alone]
    assert all(_counted(group) for group in shared)


def test_each_call_of_a_session_has_its_own_ops_and_a_preempted_one_is_profiled_again_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, calls = _case_calls(["fused", "naive"])
    with torch.inference_mode():
        firsts = stages_module._profile_cpu_session([call for call, _ in calls])
        alone = [stages_module._profile_cpu_once(call) for call, _ in calls]

    def names(ops: list[ProfiledOp]) -> list[object]:
        return [(op.name, op.shapes, names(op.children)) for op in ops]

    assert [names(first.ops) for first in firsts] == [names(one.ops) for one in alone]
    assert names(firsts[0].ops) != names(firsts[1].ops)
    preempted = [ProfiledCall(firsts[0].ops, 10.0, 9.5), ProfiledCall(firsts[1].ops, 30.0, 2.0)]
    monkeypatch.setattr(stages_module, "_profile_cpu_session", lambda session: preempted)
    again = _fake_profiles(monkeypatch, [(12.0, 12.0), (12.5, 12.5)])
    (fused_units, fused_ms), (_, naive_ms) = stages_module.profile_cpu_each([call for call, _ in calls], 4)
    assert fused_ms == 10.0 and fused_units and again == [12.0, 12.5] and naive_ms == 12.5  # median of 30, 12, 12.5


def test_a_call_that_fails_in_the_shared_session_fails_only_its_own_rows_breakdown() -> None:
    from mhabench.run.breakdown import profiled_breakdowns

    case, calls = _case_calls(["fused", "naive"])

    def broken() -> None:
        raise RuntimeError("profiled call failed")

    groups = profiled_breakdowns([calls[0], (broken, calls[1][1])], case, torch.device("cpu"))
    assert groups[0].breakdown_source == "profiler" and _counted(groups[0])
    assert groups[1].breakdown_source == "not measured: RuntimeError: profiled call failed"


def test_a_breakdowns_json_holds_each_figures_fields_in_order() -> None:
    figures = [
        StageFigures("scores", 1.5, 0.25, 2048.0, None, 2048.0, 4096.0, 3, "aten::bmm [[2,16,8]]", 2),
        StageFigures("other", 0.5, float("nan"), None, None, None, None, 0, "", 0),
    ]
    cell = breakdown_group(figures, "profiler").stage_breakdown
    assert cell == json.dumps([dataclasses.asdict(f) for f in figures], separators=(",", ":"))


def test_a_session_calls_its_first_call_twice_and_keeps_only_warm_profiles() -> None:
    made: list[str] = []

    def call(name: str) -> Any:
        return lambda: made.append(name) or torch.ones(4).sum()

    profiled = stages_module._profile_cpu_session([call("a"), call("b"), call("c")])
    assert made == ["a", "a", "b", "c"]
    assert len(profiled) == 3 and all(found.ops for found in profiled)
