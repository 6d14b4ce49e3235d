"""The process ``ncu`` profiles: exactly one call of each implementation's step on one case.

``python -m mhabench.run.ncu_child JOB STATUS`` is started under ``ncu --profile-from-start off``
(:func:`mhabench.measure.nsight.ncu_command`) by :mod:`mhabench.run.ncu_profile`, after the case's rows were
timed in another process. Per implementation, one at a time (so only one layer's memory is held): build it on
the case's inputs, warm it up (compiling implementations compile here, cuBLAS picks its kernels and the caching
allocator holds the blocks the call needs, so range replay sees no allocation inside its range), then, between
the CUDA profiler's start and stop, the one call: under kernel replay behind a marker kernel
(``torch.cuda._sleep``), which is how the parent cuts the kernel sequence into calls; under range replay each
start/stop is one result of its own. STATUS (JSON) says, in order, which implementations reached their call and
whether it raised. Nothing is printed on stdout, which carries ncu's CSV.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from pathlib import Path

import torch

from mhabench.impls import get_spec
from mhabench.measure.allocator import apply_process_settings
from mhabench.run.inputs import make_inputs
from mhabench.run.steps import prepare
from mhabench.scenario import plugins
from mhabench.scenario.cases import Case

WARMUP_CALLS = 2
"""Calls before the profiled one: the first may compile or choose kernels, the second shows the steady one."""
MARKER_CYCLES = 1_000
"""A marker kernel's spin: negligible time, and it touches no memory."""


@dataclasses.dataclass(frozen=True)
class ProfileJob:
    """What the child needs, pickled by the parent: the case, its ok implementations, and the run's settings."""

    case: Case
    impl_names: tuple[str, ...]
    device: str
    allocator: str
    threads: int | None
    plugin_files: tuple[str, ...] = ()
    replay: str = "kernel"
    """ncu's replay mode the child runs under: ``kernel`` (a marker before each call) or ``range``."""


def profile_calls(job: ProfileJob) -> list[dict[str, object]]:
    """Profile one call per implementation; per implementation that reached its marker, ``{"impl", "error"}``."""
    apply_process_settings(job.allocator, job.threads)
    plugins.load_plugin_files(job.plugin_files)
    device = torch.device(job.device)
    torch.cuda.set_device(device)
    inputs = make_inputs(job.case, device)
    status: list[dict[str, object]] = []
    for name in job.impl_names:
        try:
            _module, step = prepare(get_spec(name), job.case, inputs.weights, inputs.x)
            with torch.inference_mode():
                for _ in range(WARMUP_CALLS):
                    step.run()
            torch.cuda.synchronize(device)
        except Exception as exc:  # not profiled: no marker, so the parent's count of calls leaves it out
            print(f"{name}: not profiled ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        status.append({"impl": name, "error": _profiled(step.run, device, marker=job.replay == "kernel")})
        del _module, step
        torch.cuda.empty_cache()
    return status


def _profiled(call: object, device: torch.device, marker: bool) -> str | None:
    """The marker (kernel replay) and one call between profiler start and stop; the call's error, or None."""
    torch.cuda.profiler.start()
    try:
        if marker:
            torch.cuda._sleep(MARKER_CYCLES)
        with torch.inference_mode():
            call()  # type: ignore[operator]
        torch.cuda.synchronize(device)
        return None
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        torch.cuda.profiler.stop()


def main(argv: list[str]) -> int:
    """``JOB STATUS``: read the pickled job, write the status JSON."""
    job_path, status_path = (Path(arg) for arg in argv)
    job = pickle.loads(job_path.read_bytes())
    status = profile_calls(job)
    status_path.write_text(json.dumps(status), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
