"""Loading scenario files: YAML in, a validated :class:`RunConfig` out, every problem one line.

The schema (:mod:`mhabench.scenario.config`) says what a valid file is; this module reads the file, expands
``model:`` presets, resolves paths against the config's folder (corpus lengths, plugins, history), checks
implementation names with "did you mean", and names every problem of a file at once.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from mhabench.errors import (
    ConfigError,
    PluginError,
    UnknownImplementationError,
    close_names,
    describe_validation_error,
    quote,
    shorten,
)
from mhabench.impls import available_implementations
from mhabench.scenario import lengths as doc_lengths
from mhabench.scenario import models, plugins
from mhabench.scenario.config import (
    DEFAULT_CONFIG_NAME,
    GPU_DEFAULT_CONFIG_NAME,
    EnergyConfig,
    RunConfig,
    ScenarioSpec,
    TimingConfig,
)
from mhabench.scenario.device import resolve_device
from mhabench.scenario.limits import check_document_size
from mhabench.scenario.windows import window_problems


def _known_fields(loc: tuple[Any, ...]) -> list[str]:
    """The fields of the model that owns ``loc`` (for "did you mean" suggestions)."""
    if loc and loc[0] == "timing":
        return list(TimingConfig.model_fields)
    if loc and loc[0] == "energy":
        return list(EnergyConfig.model_fields)
    if loc and loc[0] == "scenarios" and len(loc) > 2:
        return list(ScenarioSpec.model_fields)
    return list(RunConfig.model_fields)


def parse_config(data: Any, source: str) -> RunConfig:
    """Validate already-parsed YAML; every problem becomes a :class:`ConfigError` naming ``source``."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of fields, got a {type(data).__name__}")
    check_document_size(data, source)
    windows = window_problems(data, Path(source).parent)
    try:
        config = RunConfig.model_validate(with_models(data, source))
    except ValidationError as exc:
        names = data.get("implementations")
        extra = [f"implementations: {p}" for p in unknown_implementations(names)] if isinstance(names, list) else []
        raise ConfigError(describe_validation_error(exc, _known_fields, source, [*windows, *extra])) from None
    if windows:  # named with the file's other problems, so one fix-and-rerun finds them all
        unknown = [f"implementations: {p}" for p in unknown_implementations(config.implementations or [])]
        raise ConfigError("\n".join(f"{source}: {line}" for line in [*windows, *unknown]))
    if config.name is None:
        config = config.model_copy(update={"name": Path(source).stem})
    config = config.model_copy(update={"scenarios": [with_corpus_files(spec, source) for spec in config.scenarios]})
    if config.history is not None:  # like every path in a config: relative to its folder, not to where it ran
        config = config.model_copy(update={"history": str(Path(source).parent / config.history)})
    if config.implementations:
        config = config.model_copy(update={"implementations": register_plugin_entries(config.implementations, source)})
    check_implementations(config.implementations or [], f"{source}: implementations")
    return config


def with_corpus_files(spec: ScenarioSpec, source: str) -> ScenarioSpec:
    """``spec`` with each lengths file resolved against the config's folder and read once (a bad file is
    one line now, not a failed case later)."""
    if not spec.lengths:
        return spec
    resolved: list[doc_lengths.LengthsSpec] = []
    for item in spec.lengths:
        if isinstance(item, doc_lengths.CorpusLengths):
            item = item.model_copy(update={"file": str(Path(source).parent / item.file)})
            try:
                doc_lengths.read_corpus(item.file)
            except ValueError as exc:
                raise ConfigError(f"{source}: scenario {quote(spec.name)}: lengths: {exc}") from None
        resolved.append(item)
    return spec.model_copy(update={"lengths": resolved})


def with_models(data: dict[str, Any], source: str) -> dict[str, Any]:
    """The file's data with each scenario's ``model:`` expanded into the fields it fills (the scenario's own
    fields win), before validation, so a model's shape is checked like one written out. A config.json path
    is relative to the config file's folder, like a plugin's."""
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list):
        return data
    expanded = []
    for index, scenario in enumerate(scenarios):
        if isinstance(scenario, dict) and scenario.get("model") is not None:
            try:
                scenario = models.with_model(scenario, Path(source).parent)
            except ValueError as exc:
                raise ConfigError(f"{source}: scenarios[{index}].model: {exc}") from None
        expanded.append(scenario)
    return {**data, "scenarios": expanded}


def register_plugin_entries(names: list[str], source: str) -> list[str]:
    """Replace each ``file.py:Class`` entry by the name its class is registered under.

    Plugin paths are relative to the config file's folder, so a config and its plugin travel together.
    """
    resolved = []
    for index, name in enumerate(names):
        try:
            entry_is_class = plugins.is_class_entry(name)
            resolved.append(plugins.register_class_entry(name, Path(source).parent) if entry_is_class else name)
        except PluginError as exc:
            raise PluginError(f"{source}: implementations[{index}]: {exc}") from None
    return resolved


def check_implementations(names: list[str], where: str) -> None:
    """Every name must be registered and named once (a second row of the same (case, implementation) would
    be a duplicate that merge and --resume refuse); every unknown name is listed at once, each with the
    names it was probably meant as."""
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where}: {', '.join(map(quote, repeated))} named more than once")
    problems = unknown_implementations(names)
    if problems:
        raise UnknownImplementationError("\n".join(f"{where}: {problem}" for problem in problems))


def unknown_implementations(names: list[Any]) -> list[str]:
    """One problem per unregistered name: ``unknown implementation 'flash'; did you mean 'flash_attn'?``."""
    known = available_implementations()
    problems = []
    for name in names:
        if not isinstance(name, str) or plugins.is_class_entry(name) or name in known:
            continue
        close = close_names(name, known)
        hint = f"did you mean {' or '.join(map(quote, close))}?" if close else f"known: {', '.join(sorted(known))}"
        problems.append(f"unknown implementation {quote(name)}; {hint}")
    return problems


def load_config(path: str | Path) -> RunConfig:
    """Read and validate one YAML scenario file (``yaml.safe_load`` only)."""
    return parse_config(read_yaml(Path(path)), str(path))


def read_yaml(path: Path) -> Any:
    """``yaml.safe_load`` of a file; an unreadable file or malformed YAML is one :class:`ConfigError` line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError(f"{path}: invalid YAML{line}: {shorten(str(problem), 200)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal with more than 4300 digits
        raise ConfigError(f"{path}: invalid YAML: {shorten(str(exc), 120)}") from None
    return data


def check_device_option(device: str) -> str:
    """``--device``'s value, or one line naming it (torch would raise its own error for ``tpu``)."""
    try:
        return RunConfig._device_syntax(device)
    except ValueError as exc:
        raise ConfigError(f"--device: {exc}") from None


def default_config_name(device: str | None = None) -> str:
    """``default_gpu.yaml`` (data-centre GPU sizes) when the run would use CUDA, else ``default.yaml`` (a CPU)."""
    requested = check_device_option(device) if device is not None else "auto"
    return GPU_DEFAULT_CONFIG_NAME if resolve_device(requested).type == "cuda" else DEFAULT_CONFIG_NAME


def default_config_text(name: str = DEFAULT_CONFIG_NAME) -> str:
    """An embedded default scenario, shipped as package data."""
    return resources.files("mhabench.scenario").joinpath(name).read_text(encoding="utf-8")


def load_default_config(device: str | None = None) -> RunConfig:
    """The embedded default for the device the run will use (``--device``, else auto)."""
    name = default_config_name(device)
    return parse_config(yaml.safe_load(default_config_text(name)), name)
