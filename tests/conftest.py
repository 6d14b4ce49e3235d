"""Shared fixtures: tiny timing, fixed roofline peaks, throwaway implementations, the CUDA marker, the real H100
run."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import typer
import typer.testing
from shared_runs import recorded
from torch import nn

from mhabench.impls import register
from mhabench.impls.registry import _REGISTRY, available_implementations
from mhabench.measure.peaks import DevicePeaks
from mhabench.scenario import plugins
from mhabench.scenario.config import TimingConfig

CORE_IMPLEMENTATIONS = ("naive", "per_head", "fused", "torch_mha")
TINY_TIMING = {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 3, "warmup_runs": 1, "warmup_max_s": 0.1}
FIXED_PEAKS = DevicePeaks(peak_tflops=1.0, peak_gbps=20.0, source="test-fixed")
H100_RUN_ID = "20261126T070612Z-default-gpu"
"""The one real GPU run (the shipped GPU default on an H100, bf16), kept in shared/runs."""
_unique = itertools.count()


SLOW_TESTS = (
    "tests/test_browser.py",
    "tests/test_concurrent_runs.py",
    "tests/test_distributed.py",
    "tests/test_distributed_run.py",
    "tests/test_ab.py::test_ab_end_to_end",
    "tests/test_findings_decisions.py",
    "tests/test_findings_figures.py",
    "tests/test_findings_runs.py",
    "tests/test_fused_fp8.py",
    "tests/test_fuzz.py",
    "tests/test_gpu_check.py",
    "tests/test_hf_attention.py",
    "tests/test_history_store.py",
    "tests/test_isolation.py",
    "tests/test_pinned_outputs.py",
    "tests/test_probe_run.py",
    "tests/test_resume.py",
    "tests/test_cli.py::test_profiled_keeps_the_exit_status",
    "tests/test_cli.py::test_python_dash_m_works",
    "tests/test_patterns.py::test_flex_matches_the_independent_computation",
    "tests/test_peers.py",
    "tests/test_pooled_rows.py",
    "tests/test_replication.py::test_run_replicates_measures_each_process",
    "tests/test_report.py",
    "tests/test_runner.py::test_after_a_sticky_cuda_error",
    "tests/test_sdpa_nested.py",
)
"""Tests (node id prefixes) that take seconds each: a process started, torch.compile, transformers, a stored run
answered again. ``make test-fast`` leaves them out; ``make test`` runs them."""
CORE_TESTS = tuple(
    f"tests/test_{name}.py"
    for name in (
        "ablations",
        "allocator",
        "cli",
        "config",
        "cost",
        "drift",
        "estimate",
        "fingerprint",
        "limits",
        "measure",
        "memory_guard",
        "pooling",
        "reference",
        "replication",
        "rounds",
        "runner",
        "schema",
        "speedup",
        "step_detection",
        "torch_errors",
        "verdict",
    )
)
"""The data path's own tests, YAML to config, cases, layers and their reference, timing, rows, the run and its
command line, speedups and verdicts: marked ``core``; ``make test-fast`` runs those not marked ``slow``."""


LONGEST_FILES = tuple(
    f"tests/test_{name}.py"
    for name in (
        "hf_attention",
        "executors",
        "findings_figures",
        "findings_decisions",
        "replication",
        "patterns",
        "head_dim",
        "fuzz",
        "history",
        "pinned_outputs",
        "findings_runs",
        "resume",
        "concurrent_runs",
        "cli",
        "distributed_run",
        "ab",
        "history_store",
        "gpu_check",
        "plots",
        "report",
        "findings_claims",
        "runner",
    )
)
"""The test files that take longest (tens of seconds each on two cores, docs/development.md), longest first. They
are collected first, and pytest-xdist (``--dist loadfile``: a file to one worker whole) hands files out in
collection order (:func:`pytest_configure` turns off its own order, by number of tests, which sends a long file of
one test last), so the two workers end together on short files instead of one starting a long file while the other
idles."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` need a GPU; without one they are skipped, never faked. The tests of
    :data:`SLOW_TESTS`, the ``compiled`` cases and the ``cluster`` tests are marked ``slow``, those of
    :data:`CORE_TESTS` ``core``. The files of :data:`LONGEST_FILES` come first, in its order; every file keeps the
    order of its own tests."""
    rank = {name: index for index, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    skip = (
        None
        if torch.cuda.is_available()
        else pytest.mark.skip(reason="needs CUDA (torch.cuda.is_available() is False)")
    )
    for item in items:
        if item.nodeid.startswith(SLOW_TESTS) or "compiled" in item.nodeid or item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(CORE_TESTS):
            item.add_marker(pytest.mark.core)
        if skip is not None and item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker gets its share of the cores for torch's threads, so two workers on two cores do
    not run four OpenMP threads (which stall each other for milliseconds at random), and take whole files in the
    order of :data:`LONGEST_FILES`. ``CliRunner`` builds the Click command of an app once, not once an invocation
    (:func:`command_built_once`)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    typer.testing._get_command = command_built_once(typer.testing._get_command)
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's --dist loadfile hands out files in our order
        config.option.loadscopereorder = False


def command_built_once(get_command: Callable[[typer.Typer], Any]) -> Callable[[typer.Typer], Any]:
    """``get_command`` kept per app while the app's commands, groups and callback are the same objects.

    ``CliRunner.invoke`` turns the Typer app into a Click command on every call, reading every command's signature
    and evaluating its annotations: about 50 ms an invocation, which the suite pays thousands of times, where the
    ``mhabench`` process pays it once. A Click command is stateless between invocations (each gets its own context),
    and it calls the functions the app registered, so the command built once runs the same code."""
    built: dict[typer.Typer, tuple[tuple[int, ...], Any]] = {}

    def cached(app: typer.Typer) -> Any:
        shape = (id(app.registered_callback), *map(id, app.registered_commands), *map(id, app.registered_groups))
        if app not in built or built[app][0] != shape:
            built[app] = (shape, get_command(app))
        return built[app][1]

    return cached


@pytest.fixture(autouse=True)
def empty_calibration_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test starts with no machine calibration (``mhabench calibrate``), whatever this machine's cache holds."""
    folder = tmp_path_factory.mktemp("calibration-cache")
    monkeypatch.setenv("MHABENCH_CACHE_DIR", str(folder))
    return folder


@pytest.fixture
def h100_run() -> Path:
    """The H100 run folder in shared/runs (inside the checkout or beside it: :mod:`shared_runs`)."""
    return recorded(H100_RUN_ID)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread for the test: on a busy machine, or beside another pytest-xdist worker, two OpenMP
    threads stall for milliseconds at random and split reductions differently from call to call."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def tiny_timing() -> TimingConfig:
    """A few milliseconds per row: enough samples for statistics, nothing more."""
    return TimingConfig(**TINY_TIMING)


@pytest.fixture
def tiny_config_data() -> dict[str, Any]:
    """A one-case scenario (odd seq_len, causal, bias, batch 2) with tiny timing, as parsed YAML.

    One thread: tiny calls on two OpenMP threads of a busy 2-core machine stall for milliseconds.
    """
    return {
        "name": "tiny",
        "device": "cpu",
        "threads": 1,
        "timing": dict(TINY_TIMING),
        "scenarios": [{"name": "t", "batch": 2, "seq_len": 9, "d_model": 16, "heads": 2, "causal": True, "bias": True}],
    }


@pytest.fixture
def fixed_peaks(monkeypatch: pytest.MonkeyPatch) -> DevicePeaks:
    """Skip the ~1-2 s hardware measurement: the runner sees fixed, clearly labelled peaks."""
    monkeypatch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
    return FIXED_PEAKS


@pytest.fixture
def temp_impl() -> Iterator[Callable[..., str]]:
    """Register throwaway implementations under unique names; remove them from the registry afterwards."""
    names: list[str] = []

    def add(forward: Callable[[torch.Tensor], torch.Tensor], **options: Any) -> str:
        name = f"test-impl-{next(_unique)}"

        class Throwaway(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return forward(x)

        register(name, description="test only", **options)(lambda weights, heads, pattern: Throwaway())
        names.append(name)
        return name

    yield add
    for name in names:
        _REGISTRY.pop(name, None)


@pytest.fixture
def registry_snapshot() -> Iterator[None]:
    """Implementations a test registers (plugins included) are removed from the registry afterwards."""
    before = set(available_implementations())
    yield
    for name in set(available_implementations()) - before:
        _REGISTRY.pop(name, None)


@pytest.fixture(autouse=True)
def forget_loaded_plugins() -> Iterator[None]:
    """A plugin file a test loads is forgotten after it: its names leave the registry and its path leaves the
    list a spawned child loads again. Without this, two tests' plugins that register one name (each copying
    docs/examples/my_attention.py) meet in a later test's child processes, which then fail to start."""
    sources, loaded = dict(plugins._SOURCES), dict(plugins._LOADED)
    yield
    for path in set(plugins._LOADED) - set(loaded):
        for name in plugins._LOADED[path][1]:
            _REGISTRY.pop(name, None)
    plugins._SOURCES.clear()
    plugins._SOURCES.update(sources)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
