"""Rows record the device that measured them (``device_id``); an answer resting on rows of more than one device says
so (the run's notes, advise, compare, a history import); ``calibrate --devices`` measures the spread between devices.

No machine here has two GPUs: the devices are fakes (synthetic rows naming two GPU UUIDs, and a sweep whose runner
is replaced). The real multi-GPU measurement has not been made.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from synthetic_runs import row, samples, write_run
from typer.testing import CliRunner

from mhabench.analysis.device_mix import DeviceCaveat, compared_device_mix, run_device_mix
from mhabench.analysis.device_spread import device_spread
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.measure import device_identity
from mhabench.results.store import load_run
from mhabench.run import device_sweep, runner
from mhabench.views.device_mix import device_lines

GPU_A, GPU_B = "GPU-00000000-aaaa-0000-0000-000000000001", "GPU-00000000-bbbb-0000-0000-000000000002"


def on(device: str, record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "device_id": device, "device": "cuda:0"}


def case_rows(seq_len: int, device: str, scale: float = 1.0, impls: tuple[str, ...] = ("naive", "fused")) -> list:
    medians = {"naive": 2.0, "fused": 1.0}
    return [
        on(device, row(impl, samples(medians[impl] * scale, 0.01, seed=i), seq_len=seq_len))
        for i, impl in enumerate(impls)
    ]


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


# --- the column ---------------------------------------------------------------------------------------------------


def test_device_id_is_the_gpu_uuid_or_host_and_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert device_identity.device_id("cpu") == f"{socket.gethostname()}:cpu"
    device_identity.device_id.cache_clear()
    properties = SimpleNamespace(uuid="5a0b1c2d-0000-1111-2222-333344445555")
    monkeypatch.setattr(device_identity, "canonical_device", lambda device: "cuda:1")
    monkeypatch.setattr(device_identity.torch.cuda, "get_device_properties", lambda device: properties)
    try:
        assert device_identity.device_id("cuda:1") == "GPU-5a0b1c2d-0000-1111-2222-333344445555"
        device_identity.device_id.cache_clear()
        monkeypatch.setattr(device_identity.torch.cuda, "get_device_properties", lambda device: SimpleNamespace())
        assert device_identity.device_id("cuda:1") == f"{socket.gethostname()}:cuda:1"  # no UUID: host and index
    finally:
        device_identity.device_id.cache_clear()


# --- the caveat ---------------------------------------------------------------------------------------------------


def test_one_device_or_none_recorded_is_no_caveat() -> None:
    assert run_device_mix(pd.DataFrame(case_rows(64, GPU_A) + case_rows(128, GPU_A))) is None
    assert run_device_mix(pd.DataFrame([row("naive", [1.0]), row("fused", [0.5])])) is None  # before the column
    assert compared_device_mix(pd.DataFrame(case_rows(64, GPU_A)), pd.DataFrame(case_rows(64, GPU_A))) is None


def test_cases_on_two_devices_are_a_mixed_run_and_a_split_case_is_named() -> None:
    mixed = run_device_mix(pd.DataFrame(case_rows(64, GPU_A) + case_rows(128, GPU_B)))
    assert mixed is not None and mixed.code == DeviceCaveat.MIXED_DEVICES
    assert mixed.rows_per_device == ((GPU_A, 2), (GPU_B, 2)) and mixed.split_cases == ()
    split = [*case_rows(64, GPU_A, impls=("naive",)), *case_rows(64, GPU_B, impls=("fused",))]
    found = run_device_mix(pd.DataFrame(split))
    assert found is not None and found.split_cases == ("sweep/b1-n64-d64-h4-float32",)
    lines = device_lines(found)
    assert "measured on 2 devices" in lines[0] and GPU_A in lines[0]
    assert "1 case(s) ran their implementations on more than one device" in lines[1]


def test_two_runs_on_different_devices_are_compared_across_devices() -> None:
    mix = compared_device_mix(pd.DataFrame(case_rows(64, GPU_A)), pd.DataFrame(case_rows(64, GPU_B)))
    assert mix is not None and mix.code == DeviceCaveat.COMPARED_ACROSS_DEVICES and mix.devices == (GPU_A, GPU_B)
    assert "the compared rows were measured on 2 devices" in device_lines(mix)[0]


def test_advise_compare_and_history_say_so(tmp_path: Path) -> None:
    mixed = write_run(tmp_path, "mixed", case_rows(64, GPU_A) + case_rows(128, GPU_B))
    other = write_run(tmp_path, "other", case_rows(64, GPU_B) + case_rows(128, GPU_B))
    code, stdout, stderr = cli("advise", str(mixed), "--format", "json")
    assert code == 0, stderr
    rules = [caveat["code"] for caveat in json.loads(stdout)["caveats"]]
    assert "mixed_devices" in rules
    code, stdout, stderr = cli("compare", str(mixed), str(other))
    assert code == 0, stderr
    assert "the compared rows were measured on 2 devices" in " ".join(stdout.split())
    code, stdout, stderr = cli("history", str(tmp_path / "history"), "--import", str(mixed))
    assert code == 0, stderr
    assert "the cases were measured on 2 devices" in " ".join((stdout + stderr).split())


# --- calibrate --devices ------------------------------------------------------------------------------------------


def test_the_spread_is_the_median_range_across_devices() -> None:
    a = pd.DataFrame(case_rows(64, GPU_A) + case_rows(128, GPU_A))
    b = pd.DataFrame(case_rows(64, GPU_B, scale=1.04) + case_rows(128, GPU_B, scale=1.04))
    spread = device_spread([a, b])
    assert spread.devices == (GPU_A, GPU_B) and len(spread.pairs) == 4
    assert spread.between_device_spread == pytest.approx(0.04, abs=0.002)
    assert spread.relative_latency[GPU_B] > 1.0 > spread.relative_latency[GPU_A]
    with pytest.raises(InputError, match="needs two or more"):
        device_spread([a])


def test_calibrate_devices_without_two_gpus_is_one_line() -> None:
    code, _, stderr = cli("calibrate", "--devices")
    assert code == 2 and len(stderr.strip().splitlines()) == 1
    assert "needs two or more CUDA devices and this machine has 0" in stderr


def test_calibrate_devices_runs_the_sweep_on_each_of_two_fake_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two fake GPUs; each run of the sweep writes rows naming its device, the second 3 % slower."""
    monkeypatch.setattr(device_sweep.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device_sweep.torch.cuda, "device_count", lambda: 2)
    asked: list[str] = []

    def fake_run(config: Any, out: Path, progress: Any, request: Any) -> runner.RunResult:
        asked.append(config.device)
        index = int(config.device.split(":")[1])
        uuid = (GPU_A, GPU_B)[index]
        run_dir = write_run(out, f"fake-{index}", case_rows(128, uuid, 1 + 0.03 * index))
        run = load_run(run_dir)
        return runner.RunResult(run_dir, run.rows, run.manifest)

    monkeypatch.setattr(runner, "run", fake_run)
    code, stdout, stderr = cli("calibrate", "--devices", "--out", str(tmp_path))
    assert code == 0, stderr
    assert asked == ["cuda:0", "cuda:1"]
    text = " ".join(stdout.split())
    assert "between-device spread 3.0%" in text and f"{GPU_B}: 1.0" in text

    runs = ["--from", str(tmp_path / "fake-0"), "--from", "fake-1"]
    code, stdout, stderr = cli("calibrate", "--devices", *runs, "--out", str(tmp_path))
    assert code == 0, stderr
    assert "between-device spread 3.0%" in " ".join(stdout.split())
