"""The GPU configs: they load, the packaged GPU default is configs/gpu-default.yaml, and the default sweep's size
and timing caps, all computed from the shipped config by the package's own expansion.

Whether the sweep fits its two-minute aim on an H100 needs a GPU. What is checked instead is that the one real
H100 run of it (``shared/runs/20261126T070612Z-default-gpu``, beside the checkout or inside it; the tree of
commit f672fbe) measured the config that ships now, but for the timing fields in ``UNMEASURED_TIMING``; that the
shipped timing, replayed on that run's own per-call times through this tree's stopping rule, gives every row its
samples within two minutes (an estimate, docs/findings/sampling.md); and that the memory guard of this tree skips
exactly the rows that run could not hold and lets through every row that ran there. Any other change to the
default fails here until the sweep is run on a GPU again (``make gpu-sweep``) and the run replaced. Without
shared/runs those tests skip, saying so.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import yaml

from mhabench.analysis.stats import MIN_INTERVAL_SAMPLES
from mhabench.impls import get_spec
from mhabench.measure.cuda_timing import FLUSH_MIN_BYTES
from mhabench.measure.rounds import Block, run_rounds
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
49 s do not cover them; :func:`replayed_sweep_s` estimates them. Empty once a GPU run of the shipped default
replaces the H100 run (``H100_RUN_ID`` in conftest.py)."""
H100_FLUSH_MS = FLUSH_MIN_BYTES / 3.35e12 * 1e3
"""The L2 flush before every timed call: 256 MiB written at the H100's 3.35 TB/s, about 0.08 ms."""


def gpu_default() -> RunConfig:
    """The GPU default exactly as ``mhabench run`` loads it on a CUDA machine (the embedded package data)."""
    return parse_config(yaml.safe_load(default_config_text(GPU_DEFAULT_CONFIG_NAME)), GPU_DEFAULT_CONFIG_NAME)


def h100_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


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


def test_gpu_default_is_24_cases_and_96_rows_of_the_core_set() -> None:
    """The figures docs/gpu.md quotes (24 cases, 96 rows), from the expansion the runner uses."""
    config = gpu_default()
    assert count_cases(config, CUDA) == len(expand_cases(config, CUDA)) == 24
    assert config.implementations == ["naive", "per_head", "fused", "torch_mha"]
    assert all(get_spec(name).core for name in config.implementations)
    assert len({c.case_id for c in expand_cases(config, CUDA)}) == 24  # every case has its own id


def test_gpu_default_timing_asks_for_samples_the_statistics_can_use() -> None:
    """A row that reaches ``min_samples`` has a noisy flag and a speedup interval (both undefined below their
    minimums); how long the rows take is the replay's business below."""
    timing = gpu_default().timing
    assert timing.flush_l2  # on CUDA every timed call starts from a cold L2, as the datasheet roofline assumes
    assert timing.min_samples >= max(8, MIN_SPREAD_SAMPLES, MIN_INTERVAL_SAMPLES)
    assert timing.min_run_time_s <= timing.max_run_time_s


@dataclasses.dataclass(frozen=True)
class ReplayedCall:
    """A row of the H100 run as a :class:`mhabench.measure.rounds.BlockTimer`: every call takes its measured median."""

    call_ms: float
    host_ms: float

    def block(self, calls: int) -> Block:
        return Block(self.call_ms, calls * self.call_ms / 1e3)

    def sample(self, calls: int) -> Block:
        return dataclasses.replace(self.block(calls), host_ms=self.host_ms)


def rounds_wall_s(blocks: list[Block], calls: int) -> float:
    """Device time of a row's rounds: each timed call and each host-timed call behind its L2 flush."""
    hosts = [block.host_ms for block in blocks if not math.isnan(block.host_ms)]
    timed_ms = sum(calls * (block.per_call_ms + H100_FLUSH_MS) for block in blocks)
    return (timed_ms + sum(host + H100_FLUSH_MS for host in hosts)) / 1e3


def replayed_sweep_s(run_dir: Path) -> tuple[float, pd.DataFrame]:
    """The run's wall time with its rounds replaced by the shipped timing's, and each ok row's replayed samples.

    The rounds the run took (``samples`` rounds of ``calls_per_sample`` calls plus one host-timed call, the rule
    of its tree) are taken out of its manifest's wall time; what is left (start-up, checks, references, warm-up)
    is kept as it was. :func:`run_rounds`, this tree's stopping rule, then replays each case on the run's own
    per-call medians and blocks (the shipped timing keeps the run's ``min_run_time_s / min_samples``, so its block
    sizes). An estimate: calls are taken to last their median, and nothing else of a row changed."""
    timing, manifest = gpu_default().timing, h100_manifest(run_dir)
    run_timing = manifest["config"]["timing"]
    assert timing.min_run_time_s / timing.min_samples == run_timing["min_run_time_s"] / run_timing["min_samples"]
    ok = h100_rows(run_dir).query("status == 'ok'")
    ok = ok.astype({"latency_ms": float, "host_latency_ms": float, "samples": int, "calls_per_sample": int})
    replayed = []
    for _, case in ok.groupby("case_id", sort=False):
        timers = {r.impl: ReplayedCall(r.latency_ms, r.host_latency_ms) for r in case.itertuples()}
        calls = {r.impl: r.calls_per_sample for r in case.itertuples()}
        blocks = run_rounds(timers, calls, timing, seed=0)
        replayed += [(impl, len(blocks[impl]), rounds_wall_s(blocks[impl], calls[impl])) for impl in timers]
    ok = ok.assign(
        replayed_samples=[samples for _, samples, _ in replayed], replayed_s=[wall for _, _, wall in replayed]
    )
    taken_s = sum(
        rounds_wall_s([Block(r.latency_ms, math.nan, r.host_latency_ms)] * r.samples, r.calls_per_sample)
        for r in ok.itertuples()
    )
    started, finished = (datetime.datetime.fromisoformat(manifest[k]) for k in ("started_at", "finished_at"))
    return (finished - started).total_seconds() - taken_s + ok["replayed_s"].sum(), ok


def test_the_shipped_timing_gives_every_h100_row_its_samples_in_under_two_minutes(h100_run: Path) -> None:
    """The estimate of docs/findings/sampling.md (``pytest -s`` prints it): every ok row of the H100 run reaches
    ``min_samples`` under the shipped timing, where 44 of its 92 had at most two, and the sweep stays under two
    minutes."""
    estimate_s, rows = replayed_sweep_s(h100_run)
    print(f"\n{'case':48} {'impl':9} {'ms/call':>8} {'samples then':>12} {'now':>4} {'rounds s now':>12}")
    for r in rows.itertuples():
        print(
            f"{r.case_id:48} {r.impl:9} {r.latency_ms:8.2f} {r.samples:12} {r.replayed_samples:4} {r.replayed_s:12.2f}"
        )
    print(f"estimated sweep: {estimate_s:.0f} s (the run: 49 s, {int((rows.samples <= 2).sum())} rows at ≤ 2 samples)")
    assert int((rows["samples"] <= 2).sum()) == 44  # the run as the issue describes it
    assert (rows["replayed_samples"] >= gpu_default().timing.min_samples).all()
    assert estimate_s < TWO_MINUTES_S


def test_the_one_h100_run_measured_the_shipped_gpu_default(h100_run: Path) -> None:
    """The run's resolved config is today's default but for ``UNMEASURED_TIMING``, its rows are today's
    expansion, and it took under two minutes on an H100 from start to finish (the manifest's times; the whole
    command took about 50 s, with the timing it had)."""
    manifest = h100_manifest(h100_run)
    config = gpu_default()
    measured = {**manifest["config"], "timing": {**manifest["config"]["timing"], **UNMEASURED_TIMING}}
    # read back through the config model, so a field added since (at its default) does not count as a change
    resolved = RunConfig.model_validate(measured).model_dump(mode="json")
    assert resolved == config.model_dump(mode="json"), "the GPU default changed since its H100 run"
    assert manifest["environment"]["device_name"].startswith("NVIDIA H100")
    assert manifest["status"] == "complete" and manifest["repeats"] == 1
    expected = [(c.case_id, impl) for c in expand_cases(config, CUDA) for impl in config.implementations]
    rows = h100_rows(h100_run)
    assert sorted(zip(rows["case_id"], rows["impl"], strict=True)) == sorted(expected)
    started, finished = (datetime.datetime.fromisoformat(manifest[k]) for k in ("started_at", "finished_at"))
    assert (finished - started).total_seconds() < TWO_MINUTES_S


def test_the_memory_guard_skips_what_the_h100_could_not_hold_and_nothing_that_ran(
    monkeypatch: pytest.MonkeyPatch, h100_run: Path
) -> None:
    """Given the H100's memory, this tree's guard (cost model + fits) skips naive at b = 8, n = 16k (its n×n bf16
    scores alone are 137 GB at 32 heads) and nothing else; every row it lets through ran ``ok`` on the real H100,
    none ended ``oom``. A cost model that grew a case's prediction past the device, or shrank naive's scores
    under it, fails here."""
    manifest = h100_manifest(h100_run)
    monkeypatch.setattr(memory_guard, "available_bytes", lambda device: manifest["environment"]["total_memory_bytes"])
    cases: dict[str, Case] = {c.case_id: c for c in expand_cases(gpu_default(), CUDA)}
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
