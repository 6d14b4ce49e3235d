"""The GPU configs: they load, the packaged GPU default is configs/gpu-default.yaml, and the default sweep's size
and timing caps, all computed from the shipped config by the package's own expansion.

Whether the sweep fits its two-minute aim on an H100 needs a GPU. What is checked instead is that the one real
H100 run of it (``shared/runs/20261126T070612Z-default-gpu``, beside the checkout or inside it; the tree of
commit f672fbe) measured the config that ships now, but for the timing fields in ``UNMEASURED_TIMING`` and the
cases in ``DROPPED``; that the shipped timing, replayed on that run's own per-call times through this tree's
stopping rule (:mod:`mhabench.checks.sweep_estimate`), gives every row its samples, and the sweep an estimated
90 s or less once corrected by the 24-case sweep's measured wall time; and that the memory guard of this tree skips
exactly the rows that run could not hold and lets through every row that ran there. Any other change to the
default fails here until the sweep is run on a GPU again (``make gpu-sweep``) and the run replaced. Without
shared/runs those tests skip, saying so.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import yaml
from shared_runs import recorded

from mhabench.analysis.stats import MIN_INTERVAL_SAMPLES
from mhabench.checks.sweep_estimate import (
    CommandTiming,
    command_estimate,
    command_timing,
    replayed_rows,
    rows_estimate_s,
    span_s,
)
from mhabench.impls import get_spec
from mhabench.results.schema import MIN_SPREAD_SAMPLES
from mhabench.run import memory_guard
from mhabench.run.memory_guard import case_too_big
from mhabench.run.steps import input_shape
from mhabench.scenario.cases import Case, count_cases, expand_cases
from mhabench.scenario.config import GPU_DEFAULT_CONFIG_NAME, RunConfig
from mhabench.scenario.loading import default_config_text, load_config, parse_config

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
GPU_CONFIGS = sorted(CONFIGS.glob("gpu-*.yaml"))
CUDA = torch.device("cuda")  # expand_cases and the guard only read the device's type
TWO_MINUTES_S = 120.0
UNMEASURED_TIMING = {"max_run_time_s": 6.0}
"""Timing fields of the shipped default that differ from the H100 run's, with their new values (issue 18: each
implementation spends its own cap, and the cap grew from 0.1 s so the slowest row gets its 8 samples). The run's
49 s do not cover them; :mod:`mhabench.checks.sweep_estimate` estimates them. Empty once a GPU run of the shipped
default replaces the H100 run (``H100_RUN_ID`` in conftest.py)."""
SWEEP_AIM_S = 90.0
"""The GPU default's estimated wall time on an H100 stays at or under this (the aim: under 100 s measured)."""
DROPPED = {(8, 16384, 4096)}
"""(batch, seq_len, d_model) of the recorded run's cases today's default no longer runs: the pair that took 28 of
its 71 s of timed rounds (docs/gpu.md)."""


def gpu_default() -> RunConfig:
    """The GPU default exactly as ``mhabench run`` loads it on a CUDA machine (the embedded package data)."""
    return parse_config(yaml.safe_load(default_config_text(GPU_DEFAULT_CONFIG_NAME)), GPU_DEFAULT_CONFIG_NAME)


def h100_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def recorded_config(manifest: dict[str, Any]) -> RunConfig:
    """The config a recorded run resolved, read back through today's config model (its cases, today's ids)."""
    return RunConfig.model_validate(manifest["config"])


def h100_rows(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "results.csv", keep_default_na=False)


@pytest.mark.parametrize("path", GPU_CONFIGS, ids=lambda p: p.name)
def test_gpu_configs_load(path: Path) -> None:
    config = load_config(path)
    assert config.device in ("auto", "cuda") and expand_cases(config, CUDA)


def test_packaged_gpu_default_is_the_config_file() -> None:
    packaged = resources.files("mhabench.scenario").joinpath("default_gpu.yaml").read_text(encoding="utf-8")
    assert packaged == (CONFIGS / "gpu-default.yaml").read_text(encoding="utf-8")


def test_gpu_default_is_the_issue_sweep() -> None:
    cases = expand_cases(gpu_default(), CUDA)
    assert {c.dtype for c in cases} == {"bfloat16"} and {c.head_dim for c in cases} == {128}
    assert {(c.d_model, c.heads) for c in cases} == {(4096, 32), (2048, 16)}
    assert {c.seq_len for c in cases} == {1024, 4096, 16384}
    assert {c.batch for c in cases} == {1, 8} and {c.causal for c in cases} == {False, True}
    # batch 8 reaches n = 16k at d_model 2048 only, where naive's scores do not fit (the memory guard's lesson)
    assert {(c.d_model, c.batch) for c in cases if c.seq_len == 16384} == {(4096, 1), (2048, 1), (2048, 8)}


def test_gpu_default_is_22_cases_and_88_rows_of_the_core_set() -> None:
    """The figures docs/gpu.md quotes (22 cases, 88 rows), from the expansion the runner uses."""
    config = gpu_default()
    assert count_cases(config, CUDA) == len(expand_cases(config, CUDA)) == 22
    assert config.implementations == ["naive", "per_head", "fused", "torch_mha"]
    assert all(get_spec(name).core for name in config.implementations)
    assert len({c.case_id for c in expand_cases(config, CUDA)}) == 22  # every case has its own id


def test_gpu_default_timing_asks_for_samples_the_statistics_can_use() -> None:
    """A row that reaches ``min_samples`` has a noisy flag and a speedup interval (both undefined below their
    minimums); how long the rows take is the replay's business below."""
    timing = gpu_default().timing
    assert timing.flush_l2  # on CUDA every timed call starts from a cold L2, as the datasheet roofline assumes
    assert timing.min_samples >= max(8, MIN_SPREAD_SAMPLES, MIN_INTERVAL_SAMPLES)
    assert timing.min_run_time_s <= timing.max_run_time_s


def shipped_rows() -> list[tuple[str, str]]:
    """(case_id, implementation) of every row today's GPU default runs."""
    config = gpu_default()
    return [(c.case_id, impl) for c in expand_cases(config, CUDA) for impl in config.implementations]


def h100_sweep_command() -> CommandTiming:
    """The 24-case default, timed from the shell on the H100 of 2026-11-27 (its rows were not kept)."""
    return command_timing(
        recorded("h100-20261127/default-sweep.log"), recorded("h100-20261127/default-sweep-manifest.json")
    )


def test_the_shipped_timing_gives_every_h100_row_its_samples_in_under_90_s(h100_run: Path) -> None:
    """The estimate docs/gpu.md quotes (``pytest -s`` prints it): every ok row the default still runs reaches
    ``min_samples`` under the shipped timing, where 44 of the run's 92 had at most two; the model prices the
    24-case sweep within 10 % of the 121.6 s it took from the shell, and, corrected by that measurement, today's
    sweep at 90 s or less."""
    rows = replayed_rows(h100_run, gpu_default().timing)
    measured = h100_sweep_command()
    estimate_s = command_estimate(rows, measured, shipped_rows())
    kept = rows[[key in set(shipped_rows()) for key in zip(rows["case_id"], rows["impl"], strict=True)]]
    print(f"\n{'case':48} {'impl':9} {'ms/call':>8} {'samples then':>12} {'now':>4} {'rounds s now':>12}")
    for r in kept.itertuples():
        print(
            f"{r.case_id:48} {r.impl:9} {r.latency_ms:8.2f} {r.samples:12} {r.replayed_samples:4} {r.replayed_s:12.2f}"
        )
    unscaled_s = measured.startup_s + rows_estimate_s(rows)
    print(f"24 cases: {unscaled_s:.1f} s modelled, {measured.wall_s:.1f} s measured; today's: {estimate_s:.1f} s")
    assert int((rows["samples"] <= 2).sum()) == 44  # the run as the issue describes it
    assert (
        gpu_default().timing.model_dump()
        == RunConfig.model_validate(
            json.loads(recorded("h100-20261127/default-sweep-manifest.json").read_text(encoding="utf-8"))["config"]
        ).timing.model_dump()
    )  # the command measured the shipped timing, so its wall time can correct the model
    assert len(kept) == len(shipped_rows()) - 2  # every row but the two skipped naive rows has a recorded time
    assert (kept["replayed_samples"] >= gpu_default().timing.min_samples).all()
    assert abs(unscaled_s / measured.wall_s - 1) < 0.10
    assert estimate_s <= SWEEP_AIM_S


def test_the_one_h100_run_measured_the_shipped_gpu_default_but_the_dropped_cases(h100_run: Path) -> None:
    """The run's resolved config is today's default but for ``UNMEASURED_TIMING`` and its scenarios, and today's
    rows are the run's less ``DROPPED`` (b = 8 at n = 16k, d_model 4096); it took under two minutes on an H100
    from start to finish (the manifest's times; the whole command took about 50 s, with the timing it had)."""
    manifest = h100_manifest(h100_run)
    config = gpu_default()
    measured = {**manifest["config"], "timing": {**manifest["config"]["timing"], **UNMEASURED_TIMING}}
    # read back through the config model, so a field added since (at its default) does not count as a change
    resolved = RunConfig.model_validate(measured).model_dump(mode="json")
    today = config.model_dump(mode="json")
    assert {**resolved, "scenarios": None} == {**today, "scenarios": None}, "the GPU default changed since its H100 run"
    assert manifest["environment"]["device_name"].startswith("NVIDIA H100")
    assert manifest["status"] == "complete" and manifest["repeats"] == 1
    rows = h100_rows(h100_run)
    cases = {c.case_id: c for c in expand_cases(recorded_config(manifest), CUDA)}
    recorded_rows = set(zip(rows["case_id"], rows["impl"], strict=True))
    dropped = {key for key in recorded_rows if (lambda c: (c.batch, c.seq_len, c.d_model))(cases[key[0]]) in DROPPED}
    assert len(dropped) == 8 and set(shipped_rows()) == recorded_rows - dropped
    assert span_s(manifest) < TWO_MINUTES_S


def test_the_memory_guard_skips_what_the_h100_could_not_hold_and_nothing_that_ran(
    monkeypatch: pytest.MonkeyPatch, h100_run: Path
) -> None:
    """Given the H100's memory, this tree's guard (cost model + fits) skips naive at b = 8, n = 16k (its n×n bf16
    scores alone are 137 GB at 32 heads) and nothing else; every row it lets through ran ``ok`` on the real H100,
    none ended ``oom``. A cost model that grew a case's prediction past the device, or shrank naive's scores
    under it, fails here."""
    manifest = h100_manifest(h100_run)
    monkeypatch.setattr(memory_guard, "available_bytes", lambda device: manifest["environment"]["total_memory_bytes"])
    cases: dict[str, Case] = {c.case_id: c for c in expand_cases(recorded_config(manifest), CUDA)}
    status = {(r.case_id, r.impl): r.status for r in h100_rows(h100_run).itertuples()}
    skipped = {key for key in status if case_too_big(get_spec(key[1]), cases[key[0]], CUDA) is not None}
    assert {(cases[c].batch, cases[c].seq_len, impl) for c, impl in skipped} == {(8, 16384, "naive")}
    assert len(skipped) == 4
    assert {key for key, value in status.items() if value == "skipped"} == skipped
    assert all(value == "ok" for key, value in status.items() if key not in skipped)


def test_decode_sweep_inputs_stay_small() -> None:
    """The runner draws each input in float32 on the device (``run.inputs.make_inputs``), of ``input_shape``:
    the largest (b = 32, 8k-token cache) stays under a tenth of an 80 GB H100."""
    cases = expand_cases(load_config(CONFIGS / "gpu-decode.yaml"), CUDA)
    float32_bytes = torch.finfo(torch.float32).bits // 8
    assert max(math.prod(input_shape(c)) * c.d_model * float32_bytes for c in cases) < 8e9
