"""Scenario files: pydantic models, YAML loading with one-line errors, and sweep expansion.

A config file holds run-wide settings (device, dtype, implementations, timing) and a list of
scenarios. Any size field of a scenario may be a list; a scenario expands to the cartesian
product of its lists, one :class:`Case` per combination.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from mhabench import plugins
from mhabench.errors import ConfigError, DeviceUnavailableError, PluginError, UnknownImplementationError
from mhabench.impls import get_spec

DtypeName = Literal["float32", "float16", "bfloat16"]
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
PositiveInt = Annotated[int, Field(gt=0, strict=True)]
DEFAULT_CONFIG_NAME = "default.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimingConfig(_Strict):
    """How long and how often to time each (case, implementation)."""

    min_run_time_s: float = Field(0.2, gt=0, description="minimum total timed run per row")
    max_run_time_s: float = Field(3.0, gt=0, description="cap on the timed run per row")
    min_samples: PositiveInt = Field(10, description="samples wanted for statistics (within the cap)")
    warmup_runs: int = Field(2, ge=0, description="untimed calls before timing")
    noise_threshold: float = Field(0.1, gt=0, description="IQR / median above which a row is noisy")


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


class ScenarioSpec(_Strict):
    """One scenario; list-valued fields sweep."""

    name: str = "scenario"
    batch: list[PositiveInt] = [1]
    seq_len: list[PositiveInt]
    d_model: list[PositiveInt]
    heads: list[PositiveInt]
    kv_heads: list[PositiveInt] | None = Field(None, description="key/value heads (GQA); default = heads; 1 = MQA")
    causal: list[bool] = [False]
    bias: list[bool] = [False]
    mode: list[Literal["forward", "train"]] = Field(["forward"], description="train = forward + backward")
    phase: list[Literal["prefill", "decode"]] = Field(
        ["prefill"], description="decode = one new token per sequence against a KV cache of seq_len tokens"
    )
    seed: int = 0

    @field_validator(
        "batch", "seq_len", "d_model", "heads", "kv_heads", "causal", "bias", "mode", "phase", mode="before"
    )
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return value if value is None else _as_list(value)

    @field_validator("kv_heads")
    @classmethod
    def _kv_heads_divide_heads(cls, kv_heads: list[int] | None, info: ValidationInfo) -> list[int] | None:
        """Each key/value head serves a whole group of query heads."""
        for heads, n_kv in itertools.product(info.data.get("heads", []), kv_heads or []):
            if heads % n_kv:
                raise ValueError(f"heads {heads} is not divisible by kv_heads {n_kv}")
        return kv_heads

    @field_validator("phase")
    @classmethod
    def _decode_is_inference(cls, phase: list[str], info: ValidationInfo) -> list[str]:
        if "decode" in phase and "train" in info.data.get("mode", []):
            raise ValueError("decode cannot be combined with mode train (decode measures inference)")
        return phase

    @field_validator("heads")
    @classmethod
    def _heads_divide_d_model(cls, heads: list[int], info: ValidationInfo) -> list[int]:
        """A field validator (not a model one) so the error's path ends in ``.heads``."""
        for d_model, n_heads in itertools.product(info.data.get("d_model", []), heads):
            if d_model % n_heads:
                raise ValueError(f"d_model {d_model} is not divisible by heads {n_heads}")
        return heads


class RunConfig(_Strict):
    """A whole scenario file."""

    name: str | None = None
    device: str = "auto"
    dtype: list[Literal["auto", "float32", "float16", "bfloat16"]] = ["auto"]
    implementations: list[str] | None = None
    timing: TimingConfig = TimingConfig()
    scenarios: list[ScenarioSpec] = Field(min_length=1)

    @field_validator("dtype", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("device")
    @classmethod
    def _device_syntax(cls, value: str) -> str:
        if value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit()):
            return value
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, not {value!r}")


@dataclasses.dataclass(frozen=True)
class Case:
    """One fully resolved point of a sweep: everything needed to build and run the layers."""

    scenario: str
    batch: int
    seq_len: int
    d_model: int
    heads: int
    causal: bool
    bias: bool
    dtype: str
    seed: int
    kv_heads: int | None = None
    """Key/value heads; None (the default) means ``heads``, i.e. plain multi-head attention."""
    mode: str = "forward"
    phase: str = "prefill"

    def __post_init__(self) -> None:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    @property
    def case_id(self) -> str:
        kv = f"-kv{self.kv_heads}" if self.kv_heads != self.heads else ""
        flags = "".join(f"-{flag}" for flag in ("causal", "bias") if getattr(self, flag))
        flags += "".join(f"-{value}" for value in (self.mode, self.phase) if value not in ("forward", "prefill"))
        return f"{self.scenario}/b{self.batch}-n{self.seq_len}-d{self.d_model}-h{self.heads}{kv}-{self.dtype}{flags}"


# --- loading -----------------------------------------------------------------------------------


def _model_for(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The pydantic model that owns the field at ``loc`` (for "did you mean" suggestions)."""
    if loc and loc[0] == "timing":
        return TimingConfig
    if loc and loc[0] == "scenarios" and len(loc) > 2:
        return ScenarioSpec
    return RunConfig


def _format_loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _describe(error: dict[str, Any]) -> str:
    loc = tuple(error["loc"])
    # list-valued fields report the list index last; name the field, not the element
    field_loc = loc[:-1] if len(loc) > 1 and isinstance(loc[-1], int) and loc[-2] != "scenarios" else loc
    where = _format_loc(field_loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        known = list(_model_for(loc).model_fields)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(known)}"
        return f"{where}: unknown field{hint}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return f"{where}: required field is missing"
    if error["type"] == "value_error":
        return f"{where}: {message}"
    return f"{where}: {message} (got {error.get('input')!r})"


def parse_config(data: Any, source: str) -> RunConfig:
    """Validate already-parsed YAML; every problem becomes a :class:`ConfigError` naming ``source``."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of fields, got a {type(data).__name__}")
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise ConfigError(f"{source}: {_describe(first)}{more}") from None
    if config.name is None:
        config = config.model_copy(update={"name": Path(source).stem})
    if config.implementations:
        config = config.model_copy(update={"implementations": register_plugin_entries(config.implementations, source)})
    check_implementations(config.implementations or [], f"{source}: implementations")
    return config


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
    """Every name must be registered; the error lists the known ones."""
    for name in names:
        try:
            get_spec(name)
        except UnknownImplementationError as exc:
            raise UnknownImplementationError(f"{where}: {exc}") from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate one YAML scenario file (``yaml.safe_load`` only)."""
    path = Path(path)
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
        raise ConfigError(f"{path}: invalid YAML{line}: {problem}") from None
    return parse_config(data, str(path))


def default_config_text() -> str:
    """The embedded default scenario, shipped as package data."""
    return resources.files("mhabench").joinpath(DEFAULT_CONFIG_NAME).read_text(encoding="utf-8")


def load_default_config() -> RunConfig:
    return parse_config(yaml.safe_load(default_config_text()), "default.yaml")


# --- resolution --------------------------------------------------------------------------------


def resolve_device(requested: str) -> torch.device:
    """``auto`` → CUDA when present, else CPU; CUDA on a machine without it is an input error."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(
                f"device: {requested!r} requested but CUDA is not available on this machine (use device: cpu or auto)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceUnavailableError(
                f"device: {requested!r} requested but only {torch.cuda.device_count()} GPU(s) exist"
            )
    return device


def resolve_dtype(requested: str, device: torch.device) -> str:
    """``auto`` → float32 on the CPU (bf16 matmuls are emulated there), bfloat16 on CUDA."""
    if requested == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return requested


def expand_cases(config: RunConfig, device: torch.device) -> list[Case]:
    """Every case of every scenario, in file order, each sweep in cartesian-product order."""
    dtypes = list(dict.fromkeys(resolve_dtype(d, device) for d in config.dtype))
    cases = []
    for spec in config.scenarios:
        for dtype, batch, seq_len, d_model, heads, kv_heads, causal, bias, mode, phase in itertools.product(
            dtypes, spec.batch, spec.seq_len, spec.d_model, spec.heads, spec.kv_heads or [None],
            spec.causal, spec.bias, spec.mode, spec.phase,
        ):  # fmt: skip
            cases.append(
                Case(spec.name, batch, seq_len, d_model, heads, causal, bias, dtype, spec.seed, kv_heads, mode, phase)
            )
    return cases


def with_overrides(config: RunConfig, device: str | None = None, implementations: list[str] | None = None) -> RunConfig:
    """The config with command-line ``--device`` / ``--impl`` taking precedence over the file."""
    update: dict[str, Any] = {}
    if device is not None:
        try:
            RunConfig._device_syntax(device)
        except ValueError as exc:
            raise ConfigError(f"--device: {exc}") from None
        update["device"] = device
    if implementations:
        check_implementations(implementations, "--impl")
        update["implementations"] = implementations
    return config.model_copy(update=update)
