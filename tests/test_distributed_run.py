"""Tensor-parallel runs: a real two-rank ``torchrun … mhabench run`` over gloo, and the launch errors."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mhabench.distributed.run import run_distributed
from mhabench.errors import ConfigError, InputError
from mhabench.measure.peaks import DevicePeaks
from mhabench.results import store as results
from mhabench.results.schema import ResultRow
from mhabench.run import runner
from mhabench.run.launch import LaunchEnv
from mhabench.run.request import RunRequest
from mhabench.scenario import config as config_mod
from mhabench.scenario import loading as config_loading
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.device import resolve_device

D_MODEL, SEQ_LEN, BATCH = 64, 512, 2  # enough compute that the all-reduce is a minority of a T = 2 call
ONE_HEAD_CASE = f"p/b{BATCH}-n{SEQ_LEN}-d{D_MODEL}-h1-tp2-float32-causal-bias"
TORCHRUN_TIMEOUT_S = 120
TINY_TIMING = {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 3, "warmup_runs": 1}

# A tensor-parallel layer whose construction fails on rank 1 only, before any collective: the ranks
# must agree on it (an error row naming rank 1) and go on with the next implementation in lockstep.
FLAKY_PLUGIN = """
from mhabench.impls.tensor_parallel import TensorParallelFused
from mhabench.impls import register
from mhabench import cost


@register("tp_flaky", description="tp_fused that fails on rank 1 (test)", cost=cost.FUSED)
class FailsOnRank1(TensorParallelFused):
    def __init__(self, weights, heads, causal=False, tp=None):
        super().__init__(weights, heads, causal, tp)
        if self.tp.rank == 1:
            raise RuntimeError("rank 1 cannot build this layer")
"""


def tp_config_data(**scenario: Any) -> dict[str, Any]:
    """Grouped-query attention (one K/V head per rank at T = 2) at T = 1 and 2, float32 on the CPU."""
    return {
        "name": "tp",
        "device": "cpu",
        "dtype": "float32",
        "timing": dict(TINY_TIMING),
        "implementations": ["tp_fused", "tp_naive"],
        "scenarios": [
            {
                "name": "p",
                "batch": BATCH,
                "seq_len": SEQ_LEN,
                "d_model": D_MODEL,
                "heads": 4,
                "kv_heads": 2,
                "causal": True,
                "bias": True,
                "tensor_parallel": [1, 2],
                **scenario,
            }
        ],
    }


def torchrun(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``torchrun --nproc-per-node 2 -m mhabench …`` on the loopback interface, one thread per rank."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=str(Path(__file__).parents[1]))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "mhabench",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TORCHRUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def tp_run(tmp_path_factory: pytest.TempPathFactory) -> results.Run:
    """One real two-rank run through the command line, as a user launches it."""
    tmp_path = tmp_path_factory.mktemp("tp")
    (tmp_path / "flaky.py").write_text(FLAKY_PLUGIN)
    data = {**tp_config_data(), "implementations": ["tp_fused", "tp_naive", "fused", "tp_flaky"]}
    (tmp_path / "tp.yaml").write_text(yaml.safe_dump(data))
    done = torchrun(tmp_path, "run", "tp.yaml", "--plugin", "flaky.py", "--out", "out")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("results: ") == 1  # rank 0 prints the summary; rank 1 prints nothing
    return results.load_run("latest", tmp_path / "out")


def rows_of(run: results.Run, impl: str, tensor_parallel: int) -> Any:
    rows = run.frame
    return rows[(rows["impl"] == impl) & (rows["tensor_parallel"] == tensor_parallel)]


@pytest.mark.parametrize("impl", ["tp_fused", "tp_naive"])
def test_two_ranks_match_the_float64_reference_at_t1_and_t2(tp_run: results.Run, impl: str) -> None:
    for tensor_parallel in (1, 2):
        rows = rows_of(tp_run, impl, tensor_parallel)
        assert list(rows["status"]) == ["ok"], rows["error"].tolist()
        assert (rows["max_rel_err"] <= 1e-5).all()
        assert (rows["world_size"] == 2).all() and (rows["backend"] == "gloo").all()


@pytest.mark.parametrize("impl", ["tp_fused", "tp_naive"])
def test_t2_rows_split_latency_into_compute_and_all_reduce(tp_run: results.Run, impl: str) -> None:
    rows = rows_of(tp_run, impl, 2)
    assert (rows["comm_ms"] > 0).all()
    # comm_ms and latency_ms come from different calls, so on a busy host the share may pass 1 (docs/distributed.md)
    assert (rows["comm_share"] > 0).all()
    assert (rows["comm_share"] - rows["comm_ms"] / rows["latency_ms"]).abs().max() < 1e-12
    assert (rows["allreduce_bytes"] == BATCH * SEQ_LEN * D_MODEL * 4).all()  # the full float32 output, once
    expected_gbps = 2 * (2 - 1) / 2 * rows["allreduce_bytes"] / (rows["comm_ms"] / 1e3) / 1e9
    assert (rows["bus_bandwidth_gbps"] - expected_gbps).abs().max() < 1e-9
    assert (rows["rank_peak_memory_bytes"] > 0).all()
    assert (rows["samples"] == TINY_TIMING["min_samples"]).all()
    assert rows["roofline_source"].str.endswith("× 2 ranks").all()


def test_t1_rows_come_from_rank0_alone_without_communication(tp_run: results.Run) -> None:
    rows = tp_run.frame[tp_run.frame["tensor_parallel"] == 1]
    assert len(rows) == 4 and set(rows["status"]) == {"ok"}  # tp_flaky too: rank 1 builds no T = 1 layer
    assert (rows["max_rel_err"] <= 1e-5).all()
    assert (rows["comm_ms"] == 0).all() and (rows["allreduce_bytes"] == 0).all()
    assert rows["bus_bandwidth_gbps"].isna().all() and (rows["rank_peak_memory_bytes"] > 0).all()


def test_a_one_device_implementation_is_unsupported_at_t2(tp_run: results.Run) -> None:
    rows = rows_of(tp_run, "fused", 2)
    assert list(rows["status"]) == ["unsupported"]
    assert rows["error"].str.contains("not tensor-parallel").all()


def test_a_failure_on_rank1_alone_is_an_error_row_and_the_ranks_go_on(tp_run: results.Run) -> None:
    flaky = rows_of(tp_run, "tp_flaky", 2)
    assert list(flaky["status"]) == ["error"]
    assert flaky["error"].str.startswith("rank 1: ").all() and flaky["error"].str.contains("cannot build").all()
    assert list(rows_of(tp_run, "tp_flaky", 1)["status"]) == ["ok"]


def test_manifest_records_the_launch(tp_run: results.Run) -> None:
    manifest = tp_run.manifest.as_dict()
    assert manifest["status"] == "complete"
    assert (manifest["world_size"], manifest["backend"], manifest["tensor_parallel"]) == (2, "gloo", [1, 2])
    assert manifest["environment"]["threads"] == 1  # torchrun's OMP_NUM_THREADS=1: one core per rank
    assert len(tp_run.rows) == manifest["cases"] * len(manifest["implementations"]) == 8


# --- errors: one line on rank 0, every rank exits -----------------------------------------------------


def config_with(**scenario: Any) -> config_mod.RunConfig:
    """A config that skips validation for ``scenario`` (as one built in Python could), to reach the launch checks."""
    data = tp_config_data()
    data["implementations"] = ["tp_fused"]
    config = config_loading.parse_config(data, "tp.yaml")
    spec = config.scenarios[0].model_copy(update=scenario)
    return config.model_copy(update={"scenarios": [spec]})


@pytest.mark.parametrize(
    ("scenario", "world_size", "words"),
    [
        (
            {"heads": [1], "kv_heads": None},
            2,
            f"tp.yaml: {ONE_HEAD_CASE}: tensor_parallel: heads 1 is not divisible by tensor_parallel 2",
        ),
        (
            {},
            4,
            "tp.yaml: tensor_parallel: the largest value is 2 but torchrun started WORLD_SIZE 4 processes; "
            "use `torchrun --nproc-per-node 2 -m mhabench run tp.yaml`",
        ),
        ({"tensor_parallel": [1]}, 2, "every value is 1 but torchrun started WORLD_SIZE 2"),
    ],
)
def test_bad_launches_raise_on_rank0_and_end_the_other_ranks_quietly(
    tmp_path: Path, scenario: dict[str, Any], world_size: int, words: str
) -> None:
    config = config_with(**scenario)
    rank0, rank1 = (LaunchEnv(rank, world_size, rank, "127.0.0.1") for rank in (0, 1))
    with pytest.raises(InputError) as caught:  # checked before any communication: no process group needed
        run_distributed(config, tmp_path, None, rank0, RunRequest(config_path="tp.yaml"))
    assert words in str(caught.value) and "\n" not in str(caught.value) and caught.value.exit_code == 2
    with pytest.raises(SystemExit) as quiet:
        run_distributed(config, tmp_path, None, rank1, RunRequest(config_path="tp.yaml"))
    assert quiet.value.code == 2
    assert list(tmp_path.iterdir()) == []  # no run folder


def test_settings_this_launch_cannot_honour_are_refused(tmp_path: Path) -> None:
    rank0 = LaunchEnv(0, 2, 0, "127.0.0.1")
    config = config_with()
    with pytest.raises(InputError, match=r"^--resume: not available under torchrun"):
        run_distributed(config, tmp_path, None, rank0, RunRequest(resume_dir=tmp_path))
    with pytest.raises(InputError, match=r"^isolation: 'process' does not apply under torchrun"):
        run_distributed(config.model_copy(update={"isolation": "process"}), tmp_path, None, rank0)


def test_tensor_parallel_without_torchrun_names_the_command(tmp_path: Path) -> None:
    config = config_loading.parse_config(tp_config_data(), "configs/tp.yaml")
    with pytest.raises(InputError) as caught:
        runner.run(config, tmp_path, request=RunRequest(config_path="configs/tp.yaml"))
    assert "launch it with `torchrun --nproc-per-node 2 -m mhabench run configs/tp.yaml`" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("heads", "kv_heads", "tensor_parallel", "words"),
    [
        (8, 2, [4], None),
        (8, 1, [1, 2, 8], None),  # fewer K/V heads than ranks: replicated
        (8, 8, [3], "heads 8 is not divisible by tensor_parallel 3"),
        (12, 3, [4], "kv_heads 3 does not divide tensor_parallel 4"),
    ],
)
def test_the_config_validator_allows_replicated_kv_heads(
    heads: int, kv_heads: int, tensor_parallel: list[int], words: str | None
) -> None:
    data = tp_config_data(heads=heads, kv_heads=kv_heads, d_model=96, tensor_parallel=tensor_parallel)
    if words is None:
        config = config_loading.parse_config(data, "tp.yaml")
        assert config.scenarios[0].tensor_parallel == tensor_parallel
        return
    with pytest.raises(ConfigError, match=f"^tp.yaml: scenarios\\[0\\].tensor_parallel: {words}"):
        config_loading.parse_config(data, "tp.yaml")


def test_the_shipped_config_validates_and_splits_over_two_ranks() -> None:
    config = config_loading.load_config(Path(__file__).parents[1] / "configs" / "tensor-parallel.yaml")
    cases = expand_cases(config, resolve_device("cpu"))
    assert sorted({case.tensor_parallel for case in cases}) == [1, 2]
    assert len(cases) == 8 and config.implementations == ["tp_fused", "tp_naive"]


def test_without_torchrun_a_tp_implementation_is_the_whole_layer_on_one_device(
    tmp_path: Path, fixed_peaks: DevicePeaks
) -> None:
    data = tp_config_data(tensor_parallel=1)
    result = runner.run(config_loading.parse_config(data, "tp.yaml"), tmp_path)
    assert result is not None
    rows = result.frame
    assert list(rows["impl"]) == ["tp_fused", "tp_naive"] and set(rows["status"]) == {"ok"}
    assert (rows["max_rel_err"] <= 1e-5).all() and rows["comm_ms"].isna().all()  # no launch, no distributed group


# --- one case path: the rows of every launch come from run_case ---------------------------------------


def filled(rows: list[ResultRow]) -> set[str]:
    """The columns every one of ``rows`` fills."""
    records = [row.record() for row in rows]
    return {name for name in records[0] if all(record[name] is not None for record in records)}


def test_single_process_t1_and_lockstep_rows_fill_the_same_groups(tiny_timing: config_mod.TimingConfig) -> None:
    """A T = 1 case under torchrun is a single-process case plus the launch's columns; the lockstep timer
    (here a one-rank group, no process group) fills the same groups, less what only a whole layer counts
    (``counted``, the stage breakdown) and what only interleaved rounds have (``rounds_id``)."""
    from mhabench.distributed.rows import RankSetup, single_rank_rows, tensor_parallel_rows
    from mhabench.impls import get_spec
    from mhabench.impls.tensor_parallel import TPGroup
    from mhabench.results.schema import Counted, Distributed
    from mhabench.run.case import run_case

    cpu = resolve_device("cpu")
    data = tp_config_data(tensor_parallel=1, seq_len=16)
    case = expand_cases(config_loading.parse_config(data, "tp.yaml"), cpu)[0]
    specs = [get_spec("tp_fused"), get_spec("tp_naive")]
    peaks = DevicePeaks(1.0, 1.0, "test")
    setup = RankSetup(cpu, 1, "gloo", "r", {case.dtype: peaks}, tiny_timing)
    alone = list(run_case(case, specs, cpu, "r", peaks, tiny_timing))
    t1 = list(single_rank_rows(case, specs, setup, repeat=0))
    lockstep = list(tensor_parallel_rows(case, specs, setup, TPGroup(1, 0), repeat=0))
    for rows in (alone, t1, lockstep):
        assert [(row.case.impl, row.status) for row in rows] == [("tp_fused", "ok"), ("tp_naive", "ok")]
    launch = {f.name for f in dataclasses.fields(Distributed)} - {"bus_bandwidth_gbps"}  # no traffic, no bandwidth
    counted = {f.name for f in dataclasses.fields(Counted)} - {"uncounted_ops"}  # empty: every op was counted
    assert "allocations_per_call" in filled(alone) and counted <= filled(alone)
    # ``noisy`` is defined from 5 samples: whether a tiny-timed row reaches them depends on the machine's load
    assert filled(t1) - {"noisy"} == (filled(alone) | launch) - {"noisy"}
    stages = {"stage_breakdown", "top_stage", "top_stage_share"}  # a rank's slice has no breakdown of the layer
    assert filled(lockstep) - {"noisy"} == (filled(alone) - counted - stages - {"rounds_id", "noisy"}) | launch
