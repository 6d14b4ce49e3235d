"""A run under ``torchrun``: every rank measures, rank 0 writes the run folder.

The CLI calls :func:`run_distributed` instead of ``runner.run`` when
:func:`~mhabench.run.launch.launch_env` finds a launch. The order matters because nothing may leave a rank waiting:

1. every rank makes the same checks on the same config (world size, head divisibility, settings
   this path cannot honour) before any communication, so a bad config ends every rank at once;
2. the process group starts (gloo on the CPU, NCCL on CUDA) and rank 0 creates the run folder,
   a failure there agreed on by every rank;
3. rank 0 measures the roofline peaks and shares them;
4. each case runs on the ranks of its ``tensor_parallel`` degree (the first T ranks; T = 1 on rank 0
   alone) while the others wait at the end-of-case barrier; rank 0 writes each row at once.

The process group is left on every rank on the way out (``errors_end_every_rank``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mhabench.distributed.groups import tensor_parallel_groups
from mhabench.distributed.launch import agree_on_errors, backend_name, errors_end_every_rank, init_distributed
from mhabench.distributed.rows import RankSetup, single_rank_rows, tensor_parallel_rows
from mhabench.errors import ConfigError, InputError, MhabenchError, OutputFolderError
from mhabench.impls import get_spec
from mhabench.impls.tensor_parallel import TPGroup, divisibility_problem
from mhabench.measure.allocator import apply_process_settings
from mhabench.measure.environment import environment
from mhabench.measure.peaks import DevicePeaks
from mhabench.results.lifecycle import run_folder
from mhabench.results.manifest import Manifest
from mhabench.results.schema import ResultRow
from mhabench.results.store import RunWriter, new_run_dir
from mhabench.run.launch import LaunchEnv, check_launch
from mhabench.run.request import RunRequest, Selector
from mhabench.run.runner import Pending, Progress, RunResult, implementations_of, pending, roofline_peaks
from mhabench.run.shard import folder_name
from mhabench.scenario.cases import Case, count_cases, expand_cases
from mhabench.scenario.config import RunConfig
from mhabench.scenario.device import resolve_device
from mhabench.scenario.limits import check_row_count


class RankFailedError(MhabenchError):
    """An unexpected failure on one rank: the others cannot go on in lockstep, so the run ends."""


def run_distributed(
    config: RunConfig,
    out_root: Path,
    progress: Progress | None,
    launch: LaunchEnv,
    request: RunRequest | None = None,
) -> RunResult | None:
    """Run ``config`` on this rank of a torchrun launch; rank 0 returns the run, every other rank None.

    ``request`` means what it means in ``runner.run``; its ``config_path`` names the file in the torchrun
    command of error messages, and its ``resume_dir`` is refused (a torchrun launch cannot resume).
    """
    request = request or RunRequest()
    argv, repeats, select, resume_dir = list(request.argv), request.repeats, request.select, request.resume_dir
    manifest_extra, config_path = dict(request.manifest_extra), request.config_path
    with errors_end_every_rank(launch), _one_line_failures(launch):
        todo = checked_plan(config, launch, repeats, select, config_path, resume_dir)
        device = init_distributed(launch, resolve_device(config.device).type)
        process = apply_process_settings(config.allocator, config.threads)
        writer = _rank0_writer(launch, out_root, folder_name(config.name, (manifest_extra or {}).get("shard")))
        groups = tensor_parallel_groups(sorted({case.tensor_parallel for _, case, _ in todo} | {1}))
        peaks = _shared_peaks(launch, device, sorted({case.dtype for _, case, _ in todo}))
        setup = RankSetup(
            device,
            launch.world_size,
            backend_name(device.type),
            _run_id(writer),
            peaks,
            config.timing,
            config.memory_guard,
        )
        if writer is None:
            run_cases(todo, groups, setup, None, None)
            return None
        extra = {**(manifest_extra or {}), "roofline": {dtype: dataclasses.asdict(p) for dtype, p in peaks.items()}}
        manifest = _manifest(config, device, process, argv, repeats, todo, extra)
        return _write_run(todo, groups, setup, writer, manifest, progress)


def checked_plan(
    config: RunConfig,
    launch: LaunchEnv,
    repeats: int,
    select: Selector | None,
    config_path: str,
    resume_dir: Path | None,
) -> list[Pending]:
    """What this launch runs, after every check each rank makes alike before any communication."""
    if resume_dir is not None:
        raise InputError("--resume: not available under torchrun; run the sweep again, or in shards (--shard I/N)")
    if config.isolation != "inprocess":
        raise InputError("isolation: 'process' does not apply under torchrun (every rank is its own process)")
    if config.device.startswith("cuda:"):
        raise InputError(
            f"device: {config.device!r} under torchrun; each rank takes the GPU of its LOCAL_RANK, so use cuda or auto"
        )
    device = resolve_device(config.device)
    specs = implementations_of(config)
    check_row_count(count_cases(config, device) * repeats, len(specs), config.max_rows)
    cases = expand_cases(config, device)
    check_launch(sorted({case.tensor_parallel for case in cases}), launch, config_path)
    for case in cases:
        problem = divisibility_problem(case.heads, case.kv_heads or case.heads, case.tensor_parallel)
        if problem:
            raise ConfigError(f"{config_path}: {case.case_id}: tensor_parallel: {problem}")
    return pending(cases, specs, repeats, select, set())


@contextmanager
def _one_line_failures(launch: LaunchEnv) -> Iterator[None]:
    """Any other exception becomes one :class:`RankFailedError` line, which rank 0 prints.

    A rank other than 0 prints its own line too: its failure is the cause the others only see as a
    lost connection.
    """
    try:
        yield
    except MhabenchError:
        raise
    except Exception as exc:
        message = f"rank {launch.rank}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if not launch.is_rank0:
            print(f"error: {message}", file=sys.stderr)
        raise RankFailedError(message) from None


def _rank0_writer(launch: LaunchEnv, out_root: Path, name: str) -> RunWriter | None:
    """Rank 0 creates the run folder; a failure there ends every rank (agreed before any other collective)."""
    created: list[RunWriter] = []

    def create() -> None:
        if not launch.is_rank0:
            return
        run_dir = new_run_dir(out_root, name, dt.datetime.now(dt.timezone.utc))
        try:
            created.append(RunWriter(run_dir))
        except OSError as exc:
            raise OutputFolderError(f"--out: cannot write in {run_dir} ({exc.strerror})") from None

    agree_on_errors(create)
    return created[0] if created else None


def _run_id(writer: RunWriter | None) -> str:
    """Only rank 0's rows are written; the others' rows carry no run id."""
    return writer.run_id if writer is not None else ""


def _shared_peaks(launch: LaunchEnv, device: torch.device, dtypes: list[str]) -> dict[str, DevicePeaks]:
    """Rank 0 measures (or looks up) the roofs while the others wait, then every rank holds them."""
    shared = [roofline_peaks(device, dtypes) if launch.is_rank0 else None]
    dist.broadcast_object_list(shared, src=0, device=torch.device("cpu"))
    return shared[0]


def _manifest(
    config: RunConfig,
    device: torch.device,
    process: dict[str, Any],
    argv: list[str] | None,
    repeats: int,
    todo: list[Pending],
    extra: dict[str, Any],
) -> Manifest:
    """The single-process manifest's fields, plus the launch: ``world_size``, ``backend``, ``tensor_parallel``."""
    cases = {case.case_id for _, case, _ in todo}
    return Manifest(
        command=argv or [],
        config=config.model_dump(mode="json"),
        environment={**environment(device), **process},
        cases=len(cases),
        implementations=[spec.name for spec in implementations_of(config)],
        repeats=repeats,
        world_size=dist.get_world_size(),
        backend=backend_name(device.type),
        tensor_parallel=sorted({case.tensor_parallel for _, case, _ in todo}),
        **extra,
    )


def _write_run(
    todo: list[Pending],
    groups: dict[int, TPGroup | None],
    setup: RankSetup,
    writer: RunWriter,
    manifest: Manifest,
    progress: Progress | None,
) -> RunResult:
    """Rank 0: measure its share of every case and write the run through the run-folder lifecycle."""
    if progress:
        progress.start(sum(len(names) for _, _, names in todo))
    with run_folder(writer.run_dir, manifest, writer):
        run_cases(todo, groups, setup, writer, progress)
    return RunResult(writer.run_dir, list(writer.rows), manifest)


def run_cases(
    todo: list[Pending],
    groups: dict[int, TPGroup | None],
    setup: RankSetup,
    writer: RunWriter | None,
    progress: Progress | None,
) -> None:
    """Every pending case on the ranks of its degree; every rank meets the others after each case."""
    for repeat, case, names in todo:
        tp = groups[case.tensor_parallel]
        if tp is not None:
            for row in case_rows(case, names, setup, tp, repeat):
                if writer is not None:
                    writer.append(row)
                if progress:
                    progress.advance(f"{row.case.case_id} {row.case.impl}")
        agree_on_errors(lambda: None)  # the barrier: the next case starts on every rank together


def case_rows(case: Case, names: list[str], setup: RankSetup, tp: TPGroup, repeat: int) -> Iterator[ResultRow]:
    """T = 1: the single-process rows (rank 0 alone). T > 1: the lockstep rows of the group."""
    specs = [get_spec(name) for name in names]
    if case.tensor_parallel == 1:
        return single_rank_rows(case, specs, setup, repeat)
    return tensor_parallel_rows(case, specs, setup, tp, repeat)
