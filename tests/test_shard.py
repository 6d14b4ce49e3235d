"""Sharded sweeps: the balanced, deterministic split, and merging shard runs back into one run."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import InputError, OutputFolderError
from mhabench.measure.peaks import DevicePeaks
from mhabench.results import store as results
from mhabench.results.manifest import Shard
from mhabench.results.merge import ROW_KEY, merge_runs
from mhabench.results.schema import FORMAT_VERSION
from mhabench.run import runner
from mhabench.run.shard import (
    Pair,
    assign_shards,
    folder_name,
    parse_shard,
    predicted_pair_s,
    predicted_times,
    shard_pairs,
    shard_selector,
)
from mhabench.scenario import config as config_mod
from mhabench.scenario import loading as config_loading
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.device import resolve_device

TIMING = {"min_run_time_s": 0.2, "max_run_time_s": 3.0, "min_samples": 10}
# a real, tiny sweep: three cases × two implementations, measured on the CPU
SHARDED_CONFIG = {
    "name": "sharded",
    "device": "cpu",
    "implementations": ["naive", "fused"],
    "timing": {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 3, "warmup_runs": 1},
    "scenarios": [{"name": "t", "batch": 1, "seq_len": [8, 16, 32], "d_model": 16, "heads": 2}],
}

# --- parsing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shard"), [("0/1", Shard(0, 1)), ("3/4", Shard(3, 4)), (" 1 / 2 ", Shard(1, 2))])
def test_parse_shard(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard
    assert str(shard) == text.replace(" ", "")


@pytest.mark.parametrize("text", ["2/2", "0/0", "1", "a/b", "-1/2", "1/2/3", ""])
def test_bad_shard_is_a_one_line_input_error(text: str) -> None:
    with pytest.raises(InputError, match=r"^--shard: ") as caught:
        parse_shard(text)
    assert repr(text) in str(caught.value) and "\n" not in str(caught.value)


# --- predicted time and the split ----------------------------------------------------------------


def test_predicted_time_floors_small_pairs_and_caps_large_ones() -> None:
    tiny = predicted_pair_s(1e3, 1e3, **TIMING)
    assert tiny == pytest.approx(TIMING["min_run_time_s"], rel=1e-3)  # the timer's minimum dominates
    big = predicted_pair_s(1e11, 1e9, **TIMING)  # 0.1 s a call: 10 samples need 1 s of timing
    assert big == pytest.approx(1.0 + 4 * 0.1)
    huge = predicted_pair_s(1e13, 1e9, **TIMING)  # 10 s a call: capped timing, plus the untimed calls
    assert huge == pytest.approx(TIMING["max_run_time_s"] + 4 * 10.0)
    memory_bound = predicted_pair_s(1e3, 1e10, **TIMING)  # 0.1 s a call from bytes alone
    assert memory_bound == pytest.approx(big)


def sweep(pair_count: int = 60, seed: int = 0) -> dict[Pair, float]:
    """Predicted seconds of a made-up sweep: mostly small pairs, a few large ones."""
    rng = random.Random(seed)
    return {(f"s/n{n}", impl): rng.choice([0.2, 0.2, 0.3, 1.5, 4.0]) for n in range(pair_count) for impl in ("a", "b")}


def test_every_pair_lands_in_exactly_one_shard() -> None:
    predicted = sweep()
    shards = assign_shards(predicted, 3)
    flat = [pair for pairs in shards for pair in pairs]
    assert sorted(flat) == sorted(predicted) and len(flat) == len(set(flat))
    assert set().union(*(shard_pairs(predicted, Shard(i, 3)) for i in range(3))) == set(predicted)


def test_split_is_the_same_whatever_order_the_pairs_come_in() -> None:
    predicted = sweep()
    shuffled_items = list(predicted.items())
    random.Random(1).shuffle(shuffled_items)
    assert assign_shards(predicted, 4) == assign_shards(dict(shuffled_items), 4)
    assert assign_shards(predicted, 4) == assign_shards(dict(reversed(list(predicted.items()))), 4)


def test_ties_are_broken_by_key_so_equal_times_still_split_deterministically() -> None:
    predicted = {(f"c{i}", "x"): 1.0 for i in range(4)}
    assert assign_shards(predicted, 2) == [[("c0", "x"), ("c2", "x")], [("c1", "x"), ("c3", "x")]]


def loads(predicted: dict[Pair, float], shards: list[list[Pair]]) -> list[float]:
    return [sum(predicted[pair] for pair in pairs) for pairs in shards]


@pytest.mark.parametrize("count", [2, 3, 5])
def test_split_is_balanced_by_predicted_time(count: int) -> None:
    predicted = sweep(seed=count)
    shard_loads = loads(predicted, assign_shards(predicted, count))
    # LPT's guarantee: the longest shard is at most the mean plus the largest single pair
    assert max(shard_loads) <= sum(shard_loads) / count + max(predicted.values()) + 1e-9
    assert max(shard_loads) / (sum(shard_loads) / count) < 1.1


def test_split_is_by_time_not_by_count() -> None:
    predicted = {("big", "x"): 10.0, **{(f"small{i}", "x"): 1.0 for i in range(10)}}
    big_shard, small_shard = assign_shards(predicted, 2)
    assert big_shard == [("big", "x")] and len(small_shard) == 10


def test_more_shards_than_pairs_leaves_some_empty() -> None:
    assert assign_shards({("c", "x"): 1.0}, 3) == [[("c", "x")], [], []]


# --- merging -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, tiny run: three cases × two implementations, measured on the CPU."""
    config = config_loading.parse_config(SHARDED_CONFIG, "sharded.yaml")
    return runner.run(config, tmp_path_factory.mktemp("runs")).run_dir


def split_run(run_dir: Path, out_root: Path, count: int) -> list[Path]:
    """What ``--shard I/N`` will write: each shard's rows of the run, and ``shard`` in the manifest."""
    frame = pd.read_parquet(run_dir / results.PARQUET_NAME)
    manifest = json.loads((run_dir / results.MANIFEST_NAME).read_text())
    predicted = {
        (row.case_id, row.impl): predicted_pair_s(row.flops, row.bytes_moved, **TIMING) for row in frame.itertuples()
    }
    paths = []
    for index, pairs in enumerate(assign_shards(predicted, count)):
        path = out_root / f"shard{index}"
        path.mkdir()
        keep = [(case_id, impl) in set(pairs) for case_id, impl in zip(frame["case_id"], frame["impl"], strict=True)]
        write_run(path, frame[keep], {**manifest, "run_id": path.name, "shard": {"index": index, "count": count}})
        paths.append(path)
    return paths


def write_run(path: Path, frame: pd.DataFrame, manifest: dict[str, Any]) -> None:
    frame.to_parquet(path / results.PARQUET_NAME, index=False)
    frame.drop(columns=[results.SAMPLES_COLUMN]).to_csv(path / results.CSV_NAME, index=False)
    (path / results.MANIFEST_NAME).write_text(json.dumps(manifest))


def edit_manifest(path: Path, **changes: Any) -> None:
    manifest_path = path / results.MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    for key, value in changes.items():
        if key == "environment":
            manifest["environment"].update(value)
        else:
            manifest[key] = value
    manifest_path.write_text(json.dumps(manifest))


def test_merge_of_two_shards_equals_the_unsharded_run(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    assert all(len(pd.read_parquet(p / results.PARQUET_NAME)) > 0 for p in shards)  # both shards hold rows
    merged = merge_runs(list(reversed(shards)), tmp_path / "merged")
    assert merged.forced == []
    whole = results.load_run(unsharded)
    again = results.load_run(merged.run_dir)  # read back like any other run (compare, report)
    assert again.manifest.status == "complete" and again.manifest.shard is None
    assert [m["shard"] for m in again.manifest.as_dict()["merged_from"]] == ["0/2", "1/2"]
    assert set(again.frame["run_id"]) == {"merged"}
    left, right = (run.frame.sort_values(ROW_KEY).reset_index(drop=True) for run in (whole, again))
    assert left[ROW_KEY].equals(right[ROW_KEY])
    for column in ("latency_ms", "flops", "max_rel_err", "status"):
        pd.testing.assert_series_equal(left[column], right[column])
    assert [list(t) for t in left[results.SAMPLES_COLUMN]] == [list(t) for t in right[results.SAMPLES_COLUMN]]
    assert pd.read_csv(merged.run_dir / results.CSV_NAME)[ROW_KEY].shape == (len(left), len(ROW_KEY))


def test_merge_names_missing_shards(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 3)
    with pytest.raises(InputError, match=r"^merge: missing shard\(s\) 1/3 of 3$"):
        merge_runs([shards[0], shards[2]], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def test_merge_refuses_a_shard_given_twice(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    copy = tmp_path / "copy"
    shutil.copytree(shards[0], copy)
    with pytest.raises(InputError, match=r"shard 0/2 given twice"):
        merge_runs([shards[0], shards[1], copy], tmp_path / "merged")


def test_merge_refuses_duplicate_rows(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    first = pd.read_parquet(shards[0] / results.PARQUET_NAME)
    second = pd.read_parquet(shards[1] / results.PARQUET_NAME)
    manifest = json.loads((shards[1] / results.MANIFEST_NAME).read_text())
    write_run(shards[1], pd.concat([second, first.iloc[:1]]), manifest)
    row = first.iloc[0]
    with pytest.raises(InputError, match=f"row {row['case_id']} / {row['impl']} appears in more than one shard"):
        merge_runs(shards, tmp_path / "merged")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"environment": {"mhabench_version": "9.9.9"}}, "mhabench_version"),
        ({"environment": {"device_kind": "cuda"}}, "device_kind"),
        ({"config": {"name": "other"}}, "config"),
        ({"status": "interrupted"}, "'interrupted', not 'complete'"),
    ],
)
def test_merge_refuses_disagreeing_shards_unless_forced(
    unsharded: Path, tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    edit_manifest(shards[1], **changes)
    with pytest.raises(InputError, match="--force") as caught:
        merge_runs(shards, tmp_path / "merged")
    assert field in str(caught.value) and str(shards[1]) in str(caught.value)
    merged = merge_runs(shards, tmp_path / "merged", force=True)
    assert len(merged.forced) == 1 and field in merged.forced[0]
    assert merged.frame.shape[0] == len(pd.read_parquet(unsharded / results.PARQUET_NAME))


LOADED = {"running": "interrupted", "incomplete": "interrupted"}
"""How a shard's recorded status reads: a dead writer, or the pre-vocabulary word."""


@pytest.mark.parametrize(
    ("statuses", "merged"),
    [
        (["complete", "interrupted"], "interrupted"),
        (["failed", "interrupted"], "failed"),
        (["complete", "running"], "interrupted"),  # a shard whose process died mid-run
        (["complete", "incomplete"], "interrupted"),  # as merge wrote it before the vocabulary was closed
    ],
)
def test_a_forced_merge_of_unfinished_shards_ends_as_they_did(
    unsharded: Path, tmp_path: Path, statuses: list[str], merged: str
) -> None:
    """The merged run lacks what its shards lack: its status says so in the documented vocabulary."""
    shards = split_run(unsharded, tmp_path, 2)
    for path, status in zip(shards, statuses, strict=True):
        edit_manifest(path, status=status, pid=2**22 + 1, host=socket.gethostname())  # no such process
    result = merge_runs(shards, tmp_path / "merged", force=True)
    manifest = json.loads((tmp_path / "merged" / results.MANIFEST_NAME).read_text())
    assert result.status == manifest["status"] == results.load_run(result.run_dir).manifest.status == merged
    assert [m["status"] for m in manifest["merged_from"]] == [LOADED.get(s, s) for s in statuses]
    assert manifest["format_version"] == FORMAT_VERSION and manifest["pid"] == os.getpid()  # the merge's own
    assert manifest["run_id"] == "merged" and manifest["finished_at"] >= manifest["started_at"]


def test_a_missing_shard_is_refused_even_with_force(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 3)
    with pytest.raises(InputError, match=r"missing shard\(s\) 1/3"):
        merge_runs([shards[0], shards[2]], tmp_path / "merged", force=True)


def test_merge_refuses_a_run_that_is_not_a_shard(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    with pytest.raises(InputError, match=r"not a shard"):
        merge_runs([shards[0], unsharded], tmp_path / "merged")


def test_merge_will_not_write_into_a_used_folder(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    used = tmp_path / "used"
    used.mkdir()
    (used / "keep.txt").write_text("mine")
    with pytest.raises(OutputFolderError, match="already exists"):
        merge_runs(shards, used)
    assert (used / "keep.txt").read_text() == "mine"


# --- the selector the runner uses, and the command line -------------------------------------------


def selected(config: config_mod.RunConfig, shard: Shard, repeat: int = 0) -> set[Pair]:
    device = resolve_device(config.device)
    select = shard_selector(config, device, runner.implementations_of(config), shard)
    return {
        (case.case_id, spec.name)
        for case in expand_cases(config, device)
        for spec in runner.implementations_of(config)
        if select(case, spec.name, repeat)
    }


def test_selector_gives_every_pair_to_one_shard_with_all_its_repeats() -> None:
    config = config_loading.parse_config(SHARDED_CONFIG, "sharded.yaml")
    first, second = selected(config, Shard(0, 2)), selected(config, Shard(1, 2))
    assert first and second and not first & second and len(first | second) == 6
    assert selected(config, Shard(0, 2), repeat=3) == first  # a pair's repeats stay on one machine
    assert selected(config_loading.parse_config(SHARDED_CONFIG, "sharded.yaml"), Shard(0, 2)) == first


def test_predicted_times_grow_with_the_cost_model_and_respect_the_timing() -> None:
    data = {**SHARDED_CONFIG, "timing": {"min_run_time_s": 0.2, "max_run_time_s": 3.0, "min_samples": 10}}
    data["scenarios"] = [{"name": "t", "batch": 1, "seq_len": [8, 1 << 16], "d_model": 4096, "heads": 32}]
    config = config_loading.parse_config(data, "big.yaml")
    predicted = predicted_times(config, resolve_device("cpu"), runner.implementations_of(config))
    small, large = (predicted[(case.case_id, "naive")] for case in expand_cases(config, resolve_device("cpu")))
    assert 0.2 < small < 0.25  # the timer's minimum and a few millisecond calls: a small case costs the floor
    assert large > 3.0  # capped timing plus the untimed calls of a long call


def test_folder_name_marks_a_shard() -> None:
    assert folder_name("sweep", {"index": 1, "count": 4}) == "sweep-shard-1-of-4"
    assert folder_name(None, None) == "run"


def test_cli_shards_and_merge_equal_the_unsharded_case_set(
    unsharded: Path, tmp_path: Path, fixed_peaks: DevicePeaks
) -> None:
    config_path = tmp_path / "sharded.yaml"
    config_path.write_text(json.dumps(SHARDED_CONFIG))
    for index in range(2):
        done = CliRunner().invoke(app, ["run", str(config_path), "--shard", f"{index}/2", "--out", str(tmp_path / "s")])
        assert done.exit_code == 0, done.output
    shards = sorted((tmp_path / "s").iterdir())
    assert [p.name.split("-sharded-")[-1] for p in shards] == ["shard-0-of-2", "shard-1-of-2"]
    done = CliRunner().invoke(app, ["merge", *map(str, shards), "--out", str(tmp_path / "merged")])
    assert done.exit_code == 0, done.output
    assert f"results: {tmp_path / 'merged'}" in done.output.replace("\n", "")
    assert "status" not in done.output  # a complete merge says nothing about its status
    merged, whole = results.load_run(tmp_path / "merged"), results.load_run(unsharded)
    key = sorted(map(tuple, merged.frame[ROW_KEY].to_numpy().tolist()))
    assert key == sorted(map(tuple, whole.frame[ROW_KEY].to_numpy().tolist()))
    assert set(merged.frame["status"]) == {"ok"}
    assert CliRunner().invoke(app, ["compare", str(tmp_path / "merged")]).exit_code == 0  # read like any run


def test_cli_merge_of_an_unfinished_shard_names_the_status(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    edit_manifest(shards[1], status="interrupted")
    done = CliRunner().invoke(app, ["merge", *map(str, shards), "--out", str(tmp_path / "merged"), "--force"])
    assert done.exit_code == 0, done.output
    assert "(status interrupted: a shard did not complete)" in done.output
    assert "forced:" in done.stderr and "'interrupted', not 'complete'" in done.stderr


def test_cli_merge_errors_are_one_line_exit_2(unsharded: Path, tmp_path: Path) -> None:
    shards = split_run(unsharded, tmp_path, 2)
    done = CliRunner().invoke(app, ["merge", str(shards[0]), "--out", str(tmp_path / "merged")])
    assert done.exit_code == 2
    assert done.output.strip() == "error: merge: missing shard(s) 1/2 of 2"
    assert CliRunner().invoke(app, ["merge", str(shards[0])]).exit_code == 2  # --out is required
