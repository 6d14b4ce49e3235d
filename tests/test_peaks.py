"""The GPU datasheet table (exact models, whole words, longest match), MIG slices, the fp32/TF32 roof,
and which peaks device_peaks picks — CUDA calls mocked, so all of it runs on the CPU."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from mhabench.measure import peaks as hardware
from mhabench.measure.peaks import (
    DevicePeaks,
    RoofSource,
    cuda_copy_bytes,
    datasheet_peaks,
    device_peaks,
    match_datasheet,
    mig_reason,
    tf32_enabled,
)

# (name as torch / nvidia-smi report it, model, bf16 TFLOP/s, TB/s, fp8 TFLOP/s: dense, half the datasheet's sparse)
NAMES = [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.0, 3.35, 1979.0),
    ("NVIDIA H100 PCIe", "H100 PCIe", 756.0, 2.0, 1513.0),
    ("NVIDIA H100 NVL", "H100 NVL", 835.0, 3.9, 1671.0),
    ("NVIDIA H200", "H200 SXM", 989.0, 4.8, 1979.0),
    ("NVIDIA H200 NVL", "H200 NVL", 835.0, 4.8, 1671.0),
    ("NVIDIA GH200 480GB", "GH200 96GB", 989.0, 4.0, 1979.0),
    ("NVIDIA GH200 144G HBM3e", "GH200 144GB", 989.0, 4.9, 1979.0),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM 40GB", 312.0, 1.555, None),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB", 312.0, 2.039, None),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB", 312.0, 1.555, None),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312.0, 1.935, None),
    ("NVIDIA L40S", "L40S", 362.0, 0.864, 733.0),
    ("NVIDIA B200", "B200", 2250.0, 8.0, 4500.0),
]


@pytest.mark.parametrize(("name", "model", "tflops", "tbps", "fp8_tflops"), NAMES)
def test_each_gpu_gets_its_own_model(
    name: str, model: str, tflops: float, tbps: float, fp8_tflops: float | None
) -> None:
    peaks = datasheet_peaks(name, torch.bfloat16)
    assert peaks == DevicePeaks(tflops, tbps * 1e3, f"datasheet:{model}", fp8_tflops, RoofSource.DATASHEET)


@pytest.mark.parametrize(("name", "model", "tflops", "tbps", "fp8_tflops"), NAMES)
def test_fp8_rows_sit_on_the_fp8_roof(
    name: str, model: str, tflops: float, tbps: float, fp8_tflops: float | None
) -> None:
    """A row computed in fp8 gets the fp8 tensor rate (twice the bf16 one on Hopper and Blackwell) with the same
    bandwidth; a part without fp8 tensor cores (A100) has no fp8 roof; the case's own dtype keeps its peaks."""
    peaks = datasheet_peaks(name, torch.bfloat16)
    assert peaks is not None and peaks.for_compute(None) is peaks
    fp8 = peaks.for_compute("float8_e4m3fn")
    if fp8_tflops is None:
        assert fp8 is None
        return
    assert fp8 == DevicePeaks(
        fp8_tflops, tbps * 1e3, f"datasheet:{model} (fp8 tensor rate)", fp8_tflops, RoofSource.DATASHEET
    )
    assert fp8_tflops >= 2 * tflops - 1  # NVL/PCIe parts round their halves


def test_measured_peaks_have_no_fp8_roof() -> None:
    """A measured roof (CPU, unknown GPU, MIG slice) times a bf16 matmul: nothing says what fp8 would reach."""
    assert DevicePeaks(1.0, 10.0, "measured").for_compute("float8_e4m3fn") is None


@pytest.mark.parametrize("name", ["NVIDIA H20", "NVIDIA L40", "NVIDIA H800", "NVIDIA H100", "Some CPU", "NVIDIA B100"])
def test_unknown_or_ambiguous_names_have_no_datasheet(name: str) -> None:
    assert match_datasheet(name) is None


def test_whole_words_only() -> None:
    """GH200 contains H200 and XH200 contains H200: whole words only, so neither is an H200."""
    assert match_datasheet("NVIDIA GH200 480GB").model.startswith("GH200")
    assert match_datasheet("NVIDIA XH200") is None
    assert match_datasheet("NVIDIA H2000") is None


def test_fp32_roof_follows_tf32_setting() -> None:
    plain = datasheet_peaks("NVIDIA H100 80GB HBM3", torch.float32, tf32=False)
    tf32 = datasheet_peaks("NVIDIA H100 80GB HBM3", torch.float32, tf32=True)
    assert (plain.peak_tflops, tf32.peak_tflops) == (67.0, 495.0)
    assert plain.source.endswith("(fp32 without TF32)") and tf32.source.endswith("(fp32 via TF32 tensor cores)")
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert tf32_enabled()
        assert datasheet_peaks("NVIDIA A100-SXM4-80GB", torch.float32).peak_tflops == 156.0
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert datasheet_peaks("NVIDIA A100-SXM4-80GB", torch.float32).peak_tflops == 19.5


def test_matmul_precision_enables_tf32() -> None:
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert tf32_enabled()
        torch.set_float32_matmul_precision("highest")
        assert not tf32_enabled()
    finally:
        torch.set_float32_matmul_precision(before)


def test_mig_slices_are_recognised(monkeypatch: pytest.MonkeyPatch) -> None:
    sheet = match_datasheet("NVIDIA H100 80GB HBM3")
    assert mig_reason("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 132, sheet).startswith("MIG slice")
    assert "16 of the H100 SXM's 132 SMs" in mig_reason("NVIDIA H100 80GB HBM3", 16, sheet)
    assert mig_reason("NVIDIA H100 80GB HBM3", 132, sheet) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4f0c2b43-1234")
    assert "MIG" in mig_reason("NVIDIA H100 80GB HBM3", 132, sheet)


def fake_cuda(monkeypatch: pytest.MonkeyPatch, name: str, multiprocessors: int) -> list[torch.dtype]:
    """CUDA answers for one device; measured_peaks records the dtypes it was asked to measure."""
    measured: list[torch.dtype] = []

    def measure(device: torch.device, dtype: torch.dtype) -> DevicePeaks:
        measured.append(dtype)
        return DevicePeaks(100.0, 1000.0, "measured (mock)")

    monkeypatch.setattr(hardware, "device_name", lambda device: name)
    props = types.SimpleNamespace(multi_processor_count=multiprocessors)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: props)
    monkeypatch.setattr(hardware, "measured_peaks", measure)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return measured


def test_known_whole_gpu_uses_the_datasheet(monkeypatch: pytest.MonkeyPatch) -> None:
    measured = fake_cuda(monkeypatch, "NVIDIA H200", 132)
    assert device_peaks(torch.device("cuda"), torch.bfloat16).source == "datasheet:H200 SXM"
    assert measured == []


def test_mig_slice_is_measured_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    measured = fake_cuda(monkeypatch, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 60)
    peaks = device_peaks(torch.device("cuda"), torch.bfloat16)
    assert peaks.peak_tflops == 100.0 and measured == [torch.bfloat16]
    assert peaks.source.startswith("measured (mock); MIG slice")


def test_unknown_gpu_is_measured_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cuda(monkeypatch, "NVIDIA H20", 78)
    assert (
        device_peaks(torch.device("cuda"), torch.float16).source
        == "measured (mock); no datasheet entry for 'NVIDIA H20'"
    )


def test_copy_is_far_larger_than_l2_but_fits() -> None:
    assert cuda_copy_bytes(l2_bytes=50 * 2**20, free_bytes=80 * 2**30) == 1 << 30  # 1 GiB ≥ 16 × 50 MiB
    assert cuda_copy_bytes(l2_bytes=126 * 2**20, free_bytes=180 * 2**30) == 16 * 126 * 2**20
    assert cuda_copy_bytes(l2_bytes=50 * 2**20, free_bytes=2 * 2**30) == 2**28  # two buffers ≤ ¼ of free memory


def test_cpu_peaks_are_measured() -> None:
    hardware.measured_peaks.cache_clear()
    peaks = device_peaks(torch.device("cpu"), torch.float32)
    assert peaks.source == "measured" and peaks.peak_tflops > 0 and peaks.peak_gbps > 0


def grow(monkeypatch: pytest.MonkeyPatch, gflops_at: dict[int, float]) -> tuple[list[int], float]:
    """The sizes the CPU probe's matmul tried, and its figure, on a machine with these GFLOP/s per size."""
    tried: list[int] = []

    def best_seconds(call: Any, repeats: int) -> float:
        size = call.args[0].shape[0]
        tried.append(size)
        return 2 * size**3 / (gflops_at[size] * 1e9)

    monkeypatch.setattr(hardware, "_best_seconds", best_seconds)
    tflops = hardware._cpu_matmul_tflops(
        torch.float32, 4096, hardware.CPU_MATMUL_CALL_S, hardware.CPU_MATMUL_SETTLED_CALL_S
    )
    return tried, tflops


def test_the_cpu_matmul_stops_growing_once_a_long_enough_call_no_longer_gains(monkeypatch: pytest.MonkeyPatch) -> None:
    # 256³ and 512³ calls are under 10 ms, so their rates do not settle it however flat; 1024³ (14 ms) gains nothing
    tried, tflops = grow(monkeypatch, {256: 150, 512: 150, 1024: 150, 2048: 150})
    assert tried == [256, 512, 1024]
    assert tflops == pytest.approx(0.150)


def test_the_cpu_matmul_grows_while_doubling_still_gains(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1024³ takes 10.7 ms but gained 20 % on 512³: 2048³ is tried, gains 6 %, and 4096³ is the largest
    tried, tflops = grow(monkeypatch, {256: 100, 512: 167, 1024: 200, 2048: 212, 4096: 214})
    assert tried == [256, 512, 1024, 2048, 4096]
    assert tflops == pytest.approx(0.214)


def test_the_cpu_matmul_stops_at_a_call_of_the_longest_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # gaining all the way, the 2048³ call takes 0.11 s, past CPU_MATMUL_CALL_S
    tried, tflops = grow(monkeypatch, {256: 50, 512: 80, 1024: 120, 2048: 160})
    assert tried == [256, 512, 1024, 2048]
    assert tflops == pytest.approx(0.160)


@pytest.mark.cuda
def test_real_device_peaks_are_labelled_and_bounded() -> None:
    device = torch.device("cuda")
    peaks = device_peaks(device, torch.bfloat16)
    sheet = match_datasheet(torch.cuda.get_device_name(device))
    if sheet is not None and peaks.source.startswith("datasheet"):
        measured = hardware.measured_peaks(device, torch.bfloat16)
        assert measured.peak_tflops <= 1.05 * sheet.tensor_tflops
        assert measured.peak_gbps <= 1.05 * sheet.memory_tbps * 1e3
    else:
        assert peaks.source.startswith("measured (CUDA events")
