"""The Makefile's setup: the venv stamp follows the TORCH spec, no install failure is hidden, and a GPU that
the venv's torch cannot use is reported in one line. Runs make against a throwaway VENV, never the real one."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = ["make", "--no-print-directory", "-C", str(ROOT), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)


def stamp_for(venv: Path, torch_spec: str) -> Path:
    """The stamp ``make setup`` would touch for this spec (read off its dry run)."""
    recipe = make("-n", "setup", f"VENV={venv}", f"TORCH={torch_spec}").stdout
    touched = [line.split()[-1] for line in recipe.splitlines() if line.startswith("touch ")]
    return Path(touched[-1])


def test_the_stamp_depends_on_the_torch_spec(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    cpu, cuda = stamp_for(venv, "torch==2.13.0"), stamp_for(venv, "torch>=2.5,<=2.14.1")
    assert cpu != cuda and cpu.parent == cuda.parent == venv
    venv.mkdir()
    cpu.touch()
    assert make("-q", "setup", f"VENV={venv}", "TORCH=torch==2.13.0").returncode == 0  # up to date
    assert make("-q", "setup", f"VENV={venv}", "TORCH=torch>=2.5,<=2.14.1").returncode == 1  # must reinstall


def test_installs_are_not_hidden_behind_a_fallback(tmp_path: Path) -> None:
    recipe = make("-n", "setup", f"VENV={tmp_path / 'venv'}", "TORCH=torch>=2.5,<=2.14.1").stdout
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert any('--upgrade "torch>=2.5,<=2.14.1"' in line for line in installs)
    assert not any("||" in line for line in installs)


def fake_tools(tmp_path: Path, gpu: bool, torch_has_cuda: bool) -> tuple[Path, dict[str, str]]:
    """A VENV whose python answers like a CPU or CUDA torch, and an nvidia-smi that sees a GPU or none."""
    tools, venv = tmp_path / "tools", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    tools.mkdir()
    scripts = {
        venv
        / "bin"
        / "python": f'case "$*" in *is_available*) exit {0 if torch_has_cuda else 1};; esac\necho 2.13.0+cpu',
        tools / "nvidia-smi": "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)'" if gpu else "exit 9",
    }
    for path, body in scripts.items():
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return venv, {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize(
    ("gpu", "torch_has_cuda", "warns"), [(True, False, True), (True, True, False), (False, False, False)]
)
def test_one_line_when_a_gpu_is_there_but_torch_cannot_use_it(
    tmp_path: Path, gpu: bool, torch_has_cuda: bool, warns: bool
) -> None:
    venv, env = fake_tools(tmp_path, gpu, torch_has_cuda)
    done = make("cuda-warning", f"VENV={venv}", env=env)
    assert done.returncode == 0
    lines = done.stdout.strip().splitlines()
    if warns:
        assert len(lines) == 1 and lines[0].startswith("warning: nvidia-smi sees a GPU but")
        assert "2.13.0+cpu" in lines[0] and "TORCH='torch>=2.5,<=2.14.1'" in lines[0]
    else:
        assert lines == []


def test_gpu_check_never_reaches_an_index(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "pydantic-2.0-py3-none-any.whl").touch()
    recipe = make("-n", "gpu-check", f"WHEELS={wheels}").stdout
    installs = [line for line in recipe.splitlines() if "pip install" in line]
    assert len(installs) == 2 and all("--no-index --no-deps" in line and "--target" in line for line in installs)
    assert "-m mhabench.checks.gpu --out gpu-check" in recipe


def test_wheels_and_check_output_are_not_committed() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "wheels/" in ignored and "gpu-check/" in ignored


def fake_gpu_python(tmp_path: Path, cuda: bool, run_status: int) -> Path:
    """A python that installs nothing, answers is_available(), and logs what it was asked to run."""
    script = tmp_path / "python3"
    log = tmp_path / "calls.log"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {log}\n'
        f'case "$*" in *is_available*) exit {0 if cuda else 1};; *" run --out "*) exit {run_status};; esac\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.parametrize("run_status", [0, 1])
def test_gpu_sweep_times_the_default_run_and_keeps_its_exit_status(tmp_path: Path, run_status: int) -> None:
    python, out = fake_gpu_python(tmp_path, cuda=True, run_status=run_status), tmp_path / "out"
    done = gpu_sweep(python, out)
    assert (done.returncode == 0) == (run_status == 0)
    wall = (out / "sweep_wall.txt").read_text(encoding="utf-8")
    assert wall.startswith("mhabench run (GPU default sweep): ") and wall.strip().endswith("ms wall")
    calls = (tmp_path / "calls.log").read_text(encoding="utf-8").splitlines()
    assert f"-m mhabench run --out {out}/results" in calls
    assert not any("cProfile" in call for call in calls)


def gpu_sweep(python: Path, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return make("gpu-sweep", *args, f"GPU_PYTHON={python}", f"WHEELS={out / 'no-wheels'}", f"GPU_CHECK_OUT={out}")


@pytest.mark.parametrize("run_status", [0, 1])
def test_gpu_sweep_profiles_on_request_and_keeps_the_exit_status(tmp_path: Path, run_status: int) -> None:
    python, out = fake_gpu_python(tmp_path, cuda=True, run_status=run_status), tmp_path / "out"
    done = gpu_sweep(python, out, "PROFILE=1")
    assert (done.returncode == 0) == (run_status == 0)
    assert "under cProfile" in (out / "sweep_wall.txt").read_text(encoding="utf-8")
    calls = (tmp_path / "calls.log").read_text(encoding="utf-8")
    assert f"-m mhabench.profiled {out}/sweep.prof run --out {out}/results" in calls


def test_gpu_sweep_profile_0_does_not_profile(tmp_path: Path) -> None:
    python, out = fake_gpu_python(tmp_path, cuda=True, run_status=0), tmp_path / "out"
    assert gpu_sweep(python, out, "PROFILE=0").returncode == 0
    assert "profiled" not in (tmp_path / "calls.log").read_text(encoding="utf-8")


def test_gpu_sweep_skips_without_cuda(tmp_path: Path) -> None:
    done = gpu_sweep(fake_gpu_python(tmp_path, cuda=False, run_status=0), tmp_path / "out")
    assert done.returncode == 0 and "gpu-sweep: SKIP" in done.stdout
    assert " run --out " not in (tmp_path / "calls.log").read_text(encoding="utf-8")


def test_wheels_takes_the_cudnn_frontend_without_its_dependencies() -> None:
    """nvidia-cudnn-frontend declares nvidia-cutlass-dsl and apache-tvm-ffi for kernels fused_fp8 does not use: it is
    downloaded with --no-deps, the other wheels with theirs."""
    downloads = [line for line in make("-n", "wheels").stdout.split("\n\n")[0].replace("\\\n", "").splitlines()]
    frontend = [line for line in downloads if "nvidia-cudnn-frontend" in line]
    others = [line for line in downloads if "pydantic" in line]
    assert len(frontend) == 1 and "--no-deps" in frontend[0] and "--only-binary=:all:" in frontend[0]
    assert len(others) == 1 and "--no-deps" not in others[0]


def test_gpu_fp8_runs_its_config_from_the_gpu_site() -> None:
    recipe = make("-n", "gpu-fp8", "WHEELS=/nonexistent").stdout
    assert "-m mhabench run configs/gpu-fp8.yaml --out gpu-check/fp8" in recipe and "--target build/gpu-site" in recipe


def test_gpu_sweep_runs_the_sweep_back_to_back_then_counters_and_energy_on_request(tmp_path: Path) -> None:
    """What docs/gpu.md asks of the next GPU run in one command: three sweeps (their spread and advice across
    them: answers that must not flip), the sweep under counters, the sweep with energy windows, each timed."""
    python, out = fake_gpu_python(tmp_path, cuda=True, run_status=0), tmp_path / "out"
    for index in range(3):
        (out / "results" / f"2026112{index}T000000Z-default-gpu").mkdir(parents=True)
    assert gpu_sweep(python, out, "COUNTERS=1", "ENERGY=2").returncode == 0
    calls = (tmp_path / "calls.log").read_text(encoding="utf-8").splitlines()
    plain = [call for call in calls if call == f"-m mhabench run --out {out}/results"]
    assert len(plain) == 3
    runs = " ".join(f"{out}/results/2026112{index}T000000Z-default-gpu" for index in range(3))
    assert f"-m mhabench spread {runs}" in calls and f"-m mhabench advise {runs} --format markdown" in calls
    assert f"-m mhabench run --out {out}/results --counters hardware" in calls
    assert f"-m mhabench run --out {out}/results --energy-windows 2" in calls
    wall = (out / "sweep_wall.txt").read_text(encoding="utf-8").splitlines()
    assert len(wall) == 5 and wall[1].startswith("mhabench run (GPU default sweep 2 of 3): ")
    assert wall[3].startswith("mhabench run --counters hardware: ") and wall[4].endswith("ms wall")


def test_gpu_sweep_stops_at_a_failed_run(tmp_path: Path) -> None:
    python, out = fake_gpu_python(tmp_path, cuda=True, run_status=1), tmp_path / "out"
    assert gpu_sweep(python, out, "COUNTERS=1").returncode != 0
    calls = (tmp_path / "calls.log").read_text(encoding="utf-8")
    assert calls.count(" run --out ") == 1 and "--counters" not in calls
