"""What the manifest records about a GPU (nvidia-smi faked on PATH), one spelling per device, and the
dtype that ``auto`` means on old and new GPUs."""

from __future__ import annotations

import os
import stat
import types
from pathlib import Path

import pytest
import torch

from mhabench.measure import environment as env
from mhabench.measure.environment import math_settings, nvidia_smi
from mhabench.scenario.device import auto_dtype, canonical_device

UUID = "4f0c2b43-aaaa-bbbb-cccc-0123456789ab"
SMI_OUTPUT = (
    "GPU-11111111-2222-3333-4444-555555555555, 580.159.04, 1980, 1980, 2619, 700.00, Disabled, P0\n"
    f"GPU-{UUID}, 580.159.04, 345, 1980, 2619, 500.00, [N/A], P8\n"
)


def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, exit_code: int = 0) -> Path:
    script = tmp_path / "nvidia-smi"
    args_file = tmp_path / "args"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {args_file}\nprintf '%s' '{output}'\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(uuid=UUID))
    return args_file


def test_nvidia_smi_row_is_found_by_uuid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args_file = fake_smi(tmp_path, monkeypatch, SMI_OUTPUT)
    info = nvidia_smi(torch.device("cuda:0"))
    assert info == {
        "driver_version": "580.159.04",
        "sm_clock_mhz": 345.0,
        "sm_clock_max_mhz": 1980.0,
        "memory_clock_mhz": 2619.0,
        "power_limit_w": 500.0,
        "mig_mode": None,
        "pstate": "P8",
    }
    assert "--format=csv,noheader,nounits" in args_file.read_text()


def test_nvidia_smi_failures_record_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed", exit_code=9)
    assert nvidia_smi(torch.device("cuda")) == {}
    assert nvidia_smi(torch.device("cpu")) == {}


def test_nvidia_smi_that_hangs_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_smi(tmp_path, monkeypatch, "")
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 30\n")
    monkeypatch.setattr(env, "NVIDIA_SMI_TIMEOUT_S", 0.5)
    assert nvidia_smi(torch.device("cuda")) == {}


def test_without_nvidia_smi_nothing_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(env.shutil, "which", lambda name: None)
    assert nvidia_smi(torch.device("cuda")) == {}


@pytest.mark.parametrize(
    ("requested", "cuda", "expected"),
    [
        ("cpu", False, "cpu"),
        ("auto", False, "cpu"),
        ("auto", True, "cuda:0"),
        ("cuda", True, "cuda:0"),
        ("cuda:0", True, "cuda:0"),
        ("cuda:1", True, "cuda:1"),
        (torch.device("cuda"), True, "cuda:0"),
    ],
)
def test_one_spelling_per_device(monkeypatch: pytest.MonkeyPatch, requested: str, cuda: bool, expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert canonical_device(requested) == expected


@pytest.mark.parametrize(
    ("capability", "dtype"),
    [((7, 0), "float16"), ((7, 5), "float16"), ((8, 0), "bfloat16"), ((9, 0), "bfloat16"), ((10, 0), "bfloat16")],
)
def test_auto_dtype_is_fp16_before_ampere(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], dtype: str
) -> None:
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: capability)
    assert auto_dtype(torch.device("cuda")) == dtype
    assert auto_dtype(torch.device("cpu")) == "float32"


def test_math_settings_follow_torch() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        settings = math_settings()
        assert settings["float32_matmul_precision"] == "high" and settings["allow_tf32"] is True
    finally:
        torch.set_float32_matmul_precision(before)
    assert set(math_settings()["sdpa_enabled"]) == {"flash", "efficient", "math", "cudnn"}


def test_cpu_manifest_has_the_math_settings_and_no_gpu_fields() -> None:
    manifest = env.environment(torch.device("cpu"))
    assert manifest["device"] == "cpu" and "float32_matmul_precision" in manifest and "sdpa_enabled" in manifest
    assert "driver_version" not in manifest and "compute_capability" not in manifest


@pytest.mark.cuda
def test_cuda_manifest_records_the_gpu() -> None:
    manifest = env.environment(torch.device("cuda"))
    assert manifest["device"] == f"cuda:{torch.cuda.current_device()}"
    assert manifest["multiprocessors"] == torch.cuda.get_device_properties(0).multi_processor_count
