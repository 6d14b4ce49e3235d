"""Command-line options over a loaded config: ``--device``, ``--impl``, ``--max-rows``, ``--isolation``,
``--no-memory-guard``, ``--allocator``, ``--threads``, ``--replicates``, ``--executor`` and ``--ray-address``
take precedence over the file, each checked with a one-line error that names the option (the file's own values
were checked when it was parsed).
"""

from __future__ import annotations

from typing import Any, get_args

from mhabench.errors import ConfigError, quote
from mhabench.scenario.config import EXECUTORS, MAX_REPLICATES, MAX_ROWS_LIMIT, ExecutorConfig, IsolationMode, RunConfig
from mhabench.scenario.loading import check_device_option, check_implementations


def with_overrides(
    config: RunConfig,
    device: str | None = None,
    implementations: list[str] | None = None,
    max_rows: int | None = None,
    isolation: str | None = None,
    memory_guard: bool | None = None,
    allocator: str | None = None,
    threads: int | None = None,
    counters: str | None = None,
    energy_windows: int | None = None,
    replicates: int | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
) -> RunConfig:
    """The config with the command line's values, where given, in place of the file's."""
    update: dict[str, Any] = {}
    if device is not None:
        update["device"] = check_device_option(device)
    if implementations:
        check_implementations(implementations, "--impl")
        update["implementations"] = implementations
    if max_rows is not None:
        if isinstance(max_rows, bool) or not 1 <= max_rows <= MAX_ROWS_LIMIT:
            raise ConfigError(f"--max-rows: must be between 1 and {MAX_ROWS_LIMIT:,} (got {quote(max_rows)})")
        update["max_rows"] = max_rows
    if memory_guard is not None:
        update["memory_guard"] = memory_guard
    if allocator is not None:
        if allocator not in ("steady", "system"):
            raise ConfigError(f"--allocator: must be steady or system (got {quote(allocator)})")
        update["allocator"] = allocator
    if threads is not None:
        if isinstance(threads, bool) or not 1 <= threads <= 4096:
            raise ConfigError(f"--threads: must be between 1 and 4096 (got {quote(threads)})")
        update["threads"] = threads
    if isolation is not None:
        if isolation not in get_args(IsolationMode):
            raise ConfigError(
                f"--isolation: must be one of {', '.join(get_args(IsolationMode))} (got {quote(isolation)})"
            )
        update["isolation"] = isolation
    if counters is not None:
        if counters not in ("off", "hardware"):
            raise ConfigError(f"--counters: must be off or hardware (got {quote(counters)})")
        update["counters"] = counters
    if energy_windows is not None:
        if isinstance(energy_windows, bool) or not 0 <= energy_windows <= 100:
            raise ConfigError(f"--energy-windows: must be between 0 and 100 (got {quote(energy_windows)})")
        update["energy"] = config.energy.model_copy(update={"windows": energy_windows})
    if replicates is not None:
        if isinstance(replicates, bool) or not 1 <= replicates <= MAX_REPLICATES:
            raise ConfigError(f"--replicates: must be between 1 and {MAX_REPLICATES} (got {quote(replicates)})")
        update["replicates"] = replicates
    if executor is not None or ray_address is not None:
        update["executor"] = _executor(config, executor, ray_address)
    return config.model_copy(update=update)


def _executor(config: RunConfig, kind: str | None, ray_address: str | None) -> ExecutorConfig:
    """``--executor`` and ``--ray-address`` over the config's ``executor:`` block."""
    if kind is not None and kind not in EXECUTORS:
        raise ConfigError(f"--executor: must be one of {', '.join(EXECUTORS)} (got {quote(kind)})")
    chosen = kind or config.executor.kind
    if ray_address is not None and chosen != "ray":
        raise ConfigError(f"--ray-address: joins a Ray cluster; it needs --executor ray (the executor is {chosen})")
    ray = config.executor.ray.model_copy(update={"address": ray_address}) if ray_address else config.executor.ray
    return config.executor.model_copy(update={"kind": chosen, "ray": ray})
