"""Tensor-parallel attention: launch checks, head slicing, and real two-rank gloo runs on 127.0.0.1."""

from __future__ import annotations

import functools
import json
import math
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from mhabench.distributed.groups import tensor_parallel_groups
from mhabench.distributed.launch import (
    agree_on_errors,
    backend_for,
    backend_name,
    errors_end_every_rank,
    init_distributed,
    shutdown_distributed,
)
from mhabench.errors import ConfigError, InputError, MhabenchError
from mhabench.impls import build, get_spec
from mhabench.impls.reference import numerical_error, reference_attention
from mhabench.impls.tensor_parallel import (
    SINGLE_RANK,
    TensorParallelFused,
    TensorParallelNaive,
    TPGroup,
    all_reduce_sum,
    check_divisible,
    divisibility_problem,
    head_slice,
    using_group,
)
from mhabench.impls.weights import AttentionWeights
from mhabench.measure.comm import CommTracker, bus_bandwidth_gbps, gather_peak_bytes, lockstep_times_ms, measure_comm
from mhabench.measure.memory import LiveStorageTracker
from mhabench.pattern import CAUSAL
from mhabench.run.launch import LaunchEnv, check_launch, launch_env

VARIANTS = {"tp_fused": TensorParallelFused, "tp_naive": TensorParallelNaive}
# (heads, kv_heads): MHA, GQA split over the ranks, MQA with its one K/V head replicated
LAYOUTS = {"mha": (4, 4), "gqa": (4, 2), "mqa": (4, 1)}
D_MODEL, BATCH, SEQ_LEN = 32, 2, 9
SPAWN_TIMEOUT_S = 60


def layer_inputs(heads: int, kv_heads: int, bias: bool = True) -> tuple[AttentionWeights, torch.Tensor]:
    weights = AttentionWeights.random(D_MODEL, bias=bias, seed=3, kv_dim=kv_heads * D_MODEL // heads)
    x = torch.randn(BATCH, SEQ_LEN, D_MODEL, generator=torch.Generator().manual_seed(4))
    return weights, x


# --- launch environment and checks ---------------------------------------------------------------


def test_launch_env_is_none_without_torchrun() -> None:
    assert launch_env({"MASTER_ADDR": "10.0.0.1"}) is None


def test_launch_env_reads_torchrun_variables() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1"}
    assert launch_env(env) == LaunchEnv(rank=3, world_size=4, local_rank=1, master_addr="10.0.0.1")


@pytest.mark.parametrize(
    ("env", "field"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK"),
        ({"RANK": "0", "WORLD_SIZE": "-1"}, "WORLD_SIZE"),
    ],
)
def test_bad_launch_variables_are_one_line_input_errors(env: dict[str, str], field: str) -> None:
    with pytest.raises(InputError, match=f"^{field}: ") as caught:
        launch_env(env)
    assert "\n" not in str(caught.value)


def test_tensor_parallel_without_torchrun_names_the_command() -> None:
    with pytest.raises(InputError) as caught:
        check_launch([1, 2], None, "configs/tensor-parallel.yaml")
    message = str(caught.value)
    assert "torchrun --nproc-per-node 2 -m mhabench run configs/tensor-parallel.yaml" in message
    assert "\n" not in message and caught.value.exit_code == 2


@pytest.mark.parametrize(("sizes", "world_size"), [([1, 2, 4], 2), ([1, 2], 4)])
def test_world_size_must_match_the_largest_tensor_parallel(sizes: list[int], world_size: int) -> None:
    launch = LaunchEnv(rank=0, world_size=world_size, local_rank=0, master_addr="127.0.0.1")
    with pytest.raises(InputError, match=f"WORLD_SIZE {world_size} .*--nproc-per-node {max(sizes)} "):
        check_launch(sizes, launch, "c.yaml")


def test_a_single_rank_config_under_torchrun_is_told_to_drop_torchrun() -> None:
    words = r"every value is 1 but torchrun started WORLD_SIZE 2 .*; run it without torchrun: `mhabench run c\.yaml`$"
    with pytest.raises(InputError, match=words):
        check_launch([1], LaunchEnv(0, 2, 0, "127.0.0.1"), "c.yaml")


@pytest.mark.parametrize(
    ("sizes", "world_size"), [([1], None), ([1, 2], 2), ([2, 4], 4)], ids=["no torchrun", "tp 2", "tp 4"]
)
def test_matching_launches_pass_and_one_process_more_or_less_does_not(sizes: list[int], world_size: int | None) -> None:
    """A launch of exactly the largest degree passes; the check is not a no-op: one process more or fewer fails."""
    launch = None if world_size is None else LaunchEnv(world_size - 1, world_size, 0, "127.0.0.1")
    assert check_launch(sizes, launch, "c.yaml") is None
    for wrong in (w for w in (max(sizes) + 1, max(sizes) - 1) if w >= 1):
        wrong_launch = None if wrong == 1 else LaunchEnv(0, wrong, 0, "127.0.0.1")
        with pytest.raises(InputError, match="tensor_parallel"):
            check_launch(sizes, wrong_launch, "c.yaml")


@pytest.mark.parametrize(
    ("heads", "kv_heads", "tensor_parallel", "words"),
    [
        (6, 6, 4, "heads 6 is not divisible by tensor_parallel 4"),
        (8, 6, 2, None),
        (8, 6, 4, "kv_heads 6 is not divisible by tensor_parallel 4"),
        (6, 3, 2, "kv_heads 3 is not divisible by tensor_parallel 2"),
        (12, 3, 4, "kv_heads 3 does not divide tensor_parallel 4"),
        (8, 2, 4, None),
        (8, 1, 8, None),
    ],
)
def test_heads_and_kv_heads_must_split_over_the_ranks(
    heads: int, kv_heads: int, tensor_parallel: int, words: str | None
) -> None:
    problem = divisibility_problem(heads, kv_heads, tensor_parallel)
    if words is None:
        assert problem is None
        check_divisible(heads, kv_heads, tensor_parallel)
        return
    assert problem is not None and problem.startswith(words)
    with pytest.raises(ConfigError, match=f"^tensor_parallel: {words}"):
        check_divisible(heads, kv_heads, tensor_parallel)


def test_backend_is_chosen_by_device() -> None:
    assert (backend_for("cpu"), backend_name("cpu")) == ("gloo", "gloo")
    assert (backend_for("cuda"), backend_name("cuda")) == ("cpu:gloo,cuda:nccl", "nccl")


def test_errors_pass_through_on_rank0_and_exit_quietly_elsewhere() -> None:
    with pytest.raises(ConfigError), errors_end_every_rank(LaunchEnv(0, 2, 0, "127.0.0.1")):
        raise ConfigError("x: bad")
    with pytest.raises(SystemExit) as caught, errors_end_every_rank(LaunchEnv(1, 2, 1, "127.0.0.1")):
        raise ConfigError("x: bad")
    assert caught.value.code == 2


def test_agree_on_errors_without_a_process_group_is_the_check() -> None:
    ran: list[str] = []
    assert agree_on_errors(lambda: ran.append("check")) is None and ran == ["check"]
    with pytest.raises(InputError, match="only here"):
        agree_on_errors(lambda: (_ for _ in ()).throw(InputError("only here")))


# --- the slicing, one process playing every rank -------------------------------------------------


def test_head_slices_cover_whole_heads_and_replicate_kv() -> None:
    # 8 query heads of size 4 over 4 ranks, 2 K/V heads: ranks 0-1 share K/V head 0, ranks 2-3 head 1
    slices = [head_slice(heads=8, kv_heads=2, head_dim=4, rank=r, size=4) for r in range(4)]
    assert [(s.q.start, s.q.stop) for s in slices] == [(0, 8), (8, 16), (16, 24), (24, 32)]
    assert [(s.kv.start, s.kv.stop) for s in slices] == [(0, 4), (0, 4), (4, 8), (4, 8)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("size", [1, 2, 4])
def test_partial_outputs_sum_to_the_full_layer(variant: str, layout: str, size: int) -> None:
    """Without communication each rank returns its partial sum plus b_o: the partials add up to the layer."""
    weights, x = layer_inputs(*LAYOUTS[layout])
    heads = LAYOUTS[layout][0]
    partials = [VARIANTS[variant](weights, heads, CAUSAL, tp=TPGroup(size, r)) for r in range(size)]
    total = sum(layer(x) - weights.b_o for layer in partials) + weights.b_o
    _, max_rel_err = numerical_error(total, reference_attention(weights, x, heads, CAUSAL))
    assert max_rel_err <= 1e-5
    if size > 1:  # and one rank alone is not the layer: the test can fail
        _, alone = numerical_error(partials[0](x), reference_attention(weights, x, heads, CAUSAL))
        assert alone > 1e-2


def test_each_rank_holds_only_its_share_of_the_weights() -> None:
    weights, _ = layer_inputs(4, 4, bias=False)
    full = sum(t.numel() for t in weights.tensors())
    layer = TensorParallelFused(weights, 4, tp=TPGroup(2, 1))
    assert sum(p.numel() for p in layer.parameters()) == full // 2
    assert all(not p.requires_grad for p in layer.parameters())


def test_using_group_sets_the_group_of_layers_built_inside() -> None:
    weights, _ = layer_inputs(4, 4)
    with using_group(TPGroup(4, 2)):
        inside = TensorParallelNaive(weights, 4)
    assert (inside.tp.size, inside.local_heads) == (4, 1)
    assert TensorParallelNaive(weights, 4).tp == SINGLE_RANK


@pytest.mark.parametrize("variant", VARIANTS)
def test_registered_factories_pick_up_the_group(variant: str) -> None:
    weights, _ = layer_inputs(4, 2)
    with using_group(TPGroup(2, 1)):
        layer = build(variant, weights, 4, CAUSAL)
    assert isinstance(layer, VARIANTS[variant]) and layer.tp == TPGroup(2, 1)
    assert not get_spec(variant).capabilities.train and not get_spec(variant).capabilities.decode


def test_single_rank_layer_communicates_nothing() -> None:
    weights, x = layer_inputs(4, 2)
    with CommTracker() as tracker:
        TensorParallelFused(weights, 4)(x)
    assert tracker.stats(1).allreduce_bytes == 0 and tracker.times_ms == []
    assert math.isnan(tracker.stats(1).bus_bandwidth_gbps)
    assert tensor_parallel_groups([1]) == {1: SINGLE_RANK}


def test_bus_bandwidth_is_the_ring_all_reduce_formula() -> None:
    # 1e9 bytes in 1 s: algorithm bandwidth 1 GB/s; bus bandwidth ×2(T−1)/T
    assert bus_bandwidth_gbps(10**9, 1000.0, 2) == pytest.approx(1.0)
    assert bus_bandwidth_gbps(10**9, 1000.0, 4) == pytest.approx(1.5)
    assert bus_bandwidth_gbps(10**9, 500.0, 8) == pytest.approx(3.5)
    assert math.isnan(bus_bandwidth_gbps(10**9, 1000.0, 1))


# --- two real ranks over gloo ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join_rank(rank: int, world_size: int, port: int) -> LaunchEnv:
    """What torchrun would set, on the loopback interface only; then join the group."""
    os.environ.update(
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        GLOO_SOCKET_IFNAME="lo",
    )
    torch.set_num_threads(1)
    launch = launch_env()
    assert launch is not None
    init_distributed(launch, "cpu", timeout_s=SPAWN_TIMEOUT_S)
    return launch


def tp_worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """Both variants on every layout, their communication, lockstep timing and per-rank memory."""
    launch = join_rank(rank, world_size, port)
    with errors_end_every_rank(launch):  # leaves the group at the end: gloo aborts a process exiting inside one
        measure_layouts(launch, world_size, out_dir)


def measure_layouts(launch: LaunchEnv, world_size: int, out_dir: str) -> None:
    groups = tensor_parallel_groups([1, world_size])
    report: dict[str, Any] = {"single_rank_group": None if groups[1] is None else groups[1].size}
    tp = groups[world_size]
    assert tp is not None
    for layout, (heads, kv_heads) in LAYOUTS.items():
        weights, x = layer_inputs(heads, kv_heads)
        reference = reference_attention(weights, x, heads, CAUSAL)
        for variant, cls in VARIANTS.items():
            with using_group(tp):
                layer = cls(weights, heads, CAUSAL)
            with torch.no_grad(), LiveStorageTracker() as tracker:  # the runner's first call, per rank
                output = layer(x)
            call = functools.partial(layer, x)
            comm = measure_comm(call, tp, calls=3)
            times_ms, calls = lockstep_times_ms(
                call, torch.device("cpu"), tp, warmup_runs=1, min_samples=3, min_run_time_s=0.01
            )
            report[f"{layout}/{variant}"] = {
                "max_rel_err": numerical_error(output, reference)[1],
                "comm_ms": comm.comm_ms,
                "allreduce_bytes": comm.allreduce_bytes,
                "bus_bandwidth_gbps": comm.bus_bandwidth_gbps,
                "samples": len(times_ms),
                "calls": calls,
                "peaks": gather_peak_bytes(tracker.peak_bytes, tp),
            }
    Path(out_dir, f"rank{launch.rank}.json").write_text(json.dumps(report))


def error_worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """Rank 1 alone fails a check: both ranks must end with exit 2, and only rank 0 may print."""
    launch = join_rank(rank, world_size, port)

    def rank1_fails() -> None:
        if rank == 1:
            raise InputError("--out: cannot create a run folder on rank 1")

    try:
        with errors_end_every_rank(launch):
            agree_on_errors(rank1_fails)
            all_reduce_sum(torch.ones(1), TPGroup(world_size, rank, torch.distributed.group.WORLD))
    except MhabenchError as exc:  # what the CLI does with it: one line, then the exit code
        Path(out_dir, f"rank{rank}.txt").write_text(f"error: {exc}")
        sys.exit(exc.exit_code)


def spawn_ranks(worker: Callable[[int, int, int, str], None], out_dir: Path, world_size: int = 2) -> list[int]:
    """Start ``world_size`` spawned processes; return their exit codes, failing on any that hangs."""
    context = mp.get_context("spawn")
    port = free_port()
    processes = [context.Process(target=worker, args=(r, world_size, port, str(out_dir))) for r in range(world_size)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(SPAWN_TIMEOUT_S)
    hanging = [rank for rank, process in enumerate(processes) if process.is_alive()]
    for rank in hanging:
        processes[rank].kill()
    assert not hanging, f"ranks {hanging} were left hanging"
    return [process.exitcode for process in processes]


def test_two_gloo_ranks_match_the_reference_and_measure_the_all_reduce(tmp_path: Path) -> None:
    assert spawn_ranks(tp_worker, tmp_path) == [0, 0]
    reports = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["single_rank_group"] for r in reports] == [1, None]  # tensor_parallel 1 runs on rank 0 only
    output_bytes = BATCH * SEQ_LEN * D_MODEL * 4  # one float32 all-reduce of the full output
    for key in (f"{layout}/{variant}" for layout in LAYOUTS for variant in VARIANTS):
        for report in reports:
            row = report[key]
            assert row["max_rel_err"] <= 1e-5, key
            assert row["allreduce_bytes"] == output_bytes
            assert row["comm_ms"] > 0 and row["bus_bandwidth_gbps"] > 0
            assert row["samples"] == 3 and row["calls"] >= 1
            assert len(row["peaks"]) == 2 and all(peak > 0 for peak in row["peaks"])
        assert reports[0][key]["calls"] == reports[1][key]["calls"]  # lockstep: the same calls on both ranks
        assert reports[0][key]["peaks"] == reports[1][key]["peaks"]


def test_an_error_on_one_rank_ends_every_rank_and_only_rank0_prints(tmp_path: Path) -> None:
    assert spawn_ranks(error_worker, tmp_path) == [2, 2]
    assert (tmp_path / "rank0.txt").read_text() == "error: --out: cannot create a run folder on rank 1"
    assert not (tmp_path / "rank1.txt").exists()


# --- CUDA: NCCL (one GPU, so one rank), the gloo side for CPU flags, synchronized timing -------------


def cuda_worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """On one GPU: the mixed gloo/NCCL group, a real NCCL all-reduce (a group of one), and the layers."""
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    launch = launch_env()
    assert launch is not None
    device = init_distributed(launch, "cuda", timeout_s=SPAWN_TIMEOUT_S)
    agree_on_errors(lambda: None)  # a CPU flag over the gloo side of the group
    tp = TPGroup(1, 0, torch.distributed.group.WORLD)  # forces the NCCL all-reduce even on one rank
    report: dict[str, Any] = {"device": str(device)}
    for layout, (heads, kv_heads) in LAYOUTS.items():
        weights, x = layer_inputs(heads, kv_heads)
        reference = reference_attention(weights, x, heads, CAUSAL)
        weights, x = weights.to(device=device), x.to(device)
        for variant, cls in VARIANTS.items():
            layer = cls(weights, heads, CAUSAL, tp=tp)
            with torch.inference_mode():
                output = layer(x)
                comm = measure_comm(functools.partial(layer, x), tp, calls=3)
                times_ms, _ = lockstep_times_ms(
                    functools.partial(layer, x), device, tp, warmup_runs=1, min_samples=3, min_run_time_s=0.01
                )
            report[f"{layout}/{variant}"] = {
                "max_rel_err": numerical_error(output, reference)[1],
                "comm_ms": comm.comm_ms,
                "allreduce_bytes": comm.allreduce_bytes,
                "samples": len(times_ms),
                "peaks": gather_peak_bytes(torch.cuda.max_memory_allocated(device), tp),
            }
    Path(out_dir, "rank0.json").write_text(json.dumps(report))
    shutdown_distributed()


@pytest.mark.cuda
def test_nccl_rank_matches_the_reference_and_times_its_all_reduce(tmp_path: Path) -> None:
    assert spawn_ranks(cuda_worker, tmp_path, world_size=1) == [0]
    report = json.loads((tmp_path / "rank0.json").read_text())
    assert report["device"] == "cuda:0"
    for key in (f"{layout}/{variant}" for layout in LAYOUTS for variant in VARIANTS):
        row = report[key]
        assert row["max_rel_err"] <= 1e-5, key
        assert row["allreduce_bytes"] == BATCH * SEQ_LEN * D_MODEL * 4 and row["comm_ms"] > 0
        assert row["samples"] == 3 and len(row["peaks"]) == 1 and row["peaks"][0] > 0
