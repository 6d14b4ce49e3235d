"""Scenario files: valid input, every kind of invalid input (one-line typed errors), sweep expansion."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from mhabench.config import (
    Case,
    RunConfig,
    default_config_text,
    expand_cases,
    load_config,
    load_default_config,
    parse_config,
    resolve_device,
    with_overrides,
)
from mhabench.errors import ConfigError, DeviceUnavailableError, InputError, UnknownImplementationError

SOURCE = "configs/x.yaml"
VALID_YAML = """\
device: cpu
dtype: float32
implementations: [naive, fused]
timing: {min_run_time_s: 0.05, min_samples: 4}
scenarios:
  - name: base
    batch: 1
    seq_len: [128, 512]
    d_model: 64
    heads: [4, 8]
    causal: true
    seed: 3
"""
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised when CUDA is missing")


def scenario(**fields: Any) -> dict[str, Any]:
    return {"seq_len": 8, "d_model": 16, "heads": 2, **fields}


def config_error(data: Any, error: type[Exception] = ConfigError) -> str:
    """Parse ``data`` expecting ``error``; return its message after checking it is one line."""
    with pytest.raises(error) as caught:
        parse_config(data, SOURCE)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{SOURCE}: ")
    assert isinstance(caught.value, InputError)
    return message


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_file_parses_every_field(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID_YAML))
    assert config.device == "cpu"
    assert config.dtype == ["float32"]
    assert config.implementations == ["naive", "fused"]
    assert config.timing.min_run_time_s == 0.05
    assert config.timing.min_samples == 4
    assert config.timing.warmup_runs == 2  # default kept
    spec = config.scenarios[0]
    assert (spec.name, spec.batch, spec.seq_len, spec.d_model, spec.heads) == ("base", [1], [128, 512], [64], [4, 8])
    assert (spec.causal, spec.bias, spec.seed) == ([True], [False], 3)


def test_name_defaults_to_file_stem_and_explicit_name_wins(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, VALID_YAML, "seq-sweep.yaml")).name == "seq-sweep"
    assert load_config(write(tmp_path, "name: mine\n" + VALID_YAML)).name == "mine"


def test_embedded_default_is_valid_and_matches_configs_folder() -> None:
    config = load_default_config()
    assert config.name == "default"
    assert expand_cases(config, torch.device("cpu"))
    shipped = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
    assert shipped.read_text(encoding="utf-8") == default_config_text()


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path, "# only a comment\n")
    with pytest.raises(ConfigError, match="the file is empty") as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "- naive\n- fused\n")
    with pytest.raises(ConfigError, match="expected a mapping of fields, got a list") as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_malformed_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\ndevice: cpu\nscenarios: [\n  {seq_len: 8,, d_model: }\n  oops: [\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: invalid YAML at line ")
    line = int(message.split("at line ")[1].split(",")[0])
    assert 3 <= line <= 6
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("data", "path", "suggestion"),
    [
        ({"scenarios": [scenario(sead=1)]}, "scenarios[0].sead", "'seed'"),
        ({"scenarios": [scenario()], "timing": {"min_run_tim_s": 1}}, "timing.min_run_tim_s", "'min_run_time_s'"),
        ({"scenarios": [scenario()], "implementaions": ["naive"]}, "implementaions", "'implementations'"),
    ],
)
def test_typo_names_the_key_and_suggests_the_closest(data: dict[str, Any], path: str, suggestion: str) -> None:
    message = config_error(data)
    assert f"{SOURCE}: {path}: unknown field" in message
    assert f"did you mean {suggestion}?" in message


def test_unrelated_unknown_key_lists_the_known_fields() -> None:
    message = config_error({"scenarios": [scenario()], "zzzzzz": 1})
    assert "zzzzzz: unknown field" in message
    assert "known fields: name, device, dtype, implementations, timing, scenarios" in message


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("seq_len", 8.5, "8.5"),
        ("seq_len", "abc", "'abc'"),
        ("d_model", 0, "0"),
        ("batch", -2, "-2"),
        ("seq_len", [8, -3], "-3"),
        ("heads", True, "True"),  # a bool is not an int here
        ("batch", [1, False], "False"),
    ],
)
def test_bad_sizes_name_field_and_value(field: str, value: Any, shown: str) -> None:
    message = config_error({"scenarios": [scenario(), scenario(**{field: value})]})
    assert f"{SOURCE}: scenarios[1].{field}: " in message
    assert f"(got {shown})" in message


def test_bool_flag_rejects_a_string() -> None:
    message = config_error({"scenarios": [scenario(causal="sometimes")]})
    assert "scenarios[0].causal" in message
    assert "'sometimes'" in message


def test_required_size_missing() -> None:
    data = {"scenarios": [{"seq_len": 8, "heads": 2}]}
    assert "scenarios[0].d_model: required field is missing" in config_error(data)


def test_no_scenarios() -> None:
    assert "scenarios" in config_error({"scenarios": []})
    assert "scenarios: required field is missing" in config_error({"name": "x"})


def test_unknown_dtype() -> None:
    message = config_error({"scenarios": [scenario()], "dtype": "float8"})
    assert "dtype" in message
    assert "'float8'" in message
    assert "'bfloat16'" in message  # says what is allowed


def test_unknown_implementation_lists_known_ones() -> None:
    message = config_error(
        {"scenarios": [scenario()], "implementations": ["naive", "nope"]}, UnknownImplementationError
    )
    assert f"{SOURCE}: implementations: unknown implementation 'nope'" in message
    for name in ("naive", "per_head", "fused", "torch_mha"):
        assert name in message


def test_d_model_not_divisible_by_heads_names_heads() -> None:
    message = config_error({"scenarios": [scenario(d_model=500, heads=[4, 8])]})
    assert message == f"{SOURCE}: scenarios[0].heads: d_model 500 is not divisible by heads 8"


def test_bad_timing_value() -> None:
    message = config_error({"scenarios": [scenario()], "timing": {"min_run_time_s": 0}})
    assert "timing.min_run_time_s" in message
    assert "(got 0)" in message


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "cuda:", "CPU", "cuda:-1"])
def test_bad_device_syntax(device: str) -> None:
    message = config_error({"scenarios": [scenario()], "device": device})
    assert f"{SOURCE}: device: " in message
    assert repr(device) in message


@pytest.mark.parametrize("device", ["cpu", "auto", "cuda", "cuda:1"])
def test_good_device_syntax_parses(device: str) -> None:
    assert parse_config({"scenarios": [scenario()], "device": device}, SOURCE).device == device


@no_cuda
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_cuda_is_an_input_error(device: str) -> None:
    config = parse_config({"scenarios": [scenario()], "device": device}, SOURCE)
    with pytest.raises(DeviceUnavailableError, match="CUDA is not available") as caught:
        resolve_device(config.device)
    assert caught.value.exit_code == 2
    assert repr(device) in str(caught.value)


def test_auto_device_and_dtype_resolve_to_this_machine() -> None:
    config = parse_config({"scenarios": [scenario()]}, SOURCE)
    device = resolve_device(config.device)
    assert device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert {case.dtype for case in expand_cases(config, torch.device("cpu"))} == {"float32"}
    assert {case.dtype for case in expand_cases(config, torch.device("cuda"))} == {"bfloat16"}


def test_sweep_is_the_cartesian_product_in_order() -> None:
    spec = scenario(name="s", batch=[1, 2], seq_len=[8, 16, 32], d_model=[16, 32], heads=[2, 4], causal=[False, True])
    config = parse_config({"scenarios": [spec, scenario(name="second")], "dtype": ["float32", "bfloat16"]}, SOURCE)
    cases = expand_cases(config, torch.device("cpu"))
    first = cases[:-2]
    expected = [
        Case("s", b, n, d, h, c, False, dtype, 0)
        for dtype, b, n, d, h, c in itertools.product(
            ["float32", "bfloat16"], [1, 2], [8, 16, 32], [16, 32], [2, 4], [False, True]
        )
    ]
    assert len(first) == 2 * 2 * 3 * 2 * 2 * 2
    assert first == expected
    assert [c.scenario for c in cases[-2:]] == ["second", "second"]
    assert len(set(c.case_id for c in cases)) == len(cases)


def test_case_id_and_head_dim() -> None:
    case = Case("s", 2, 9, 16, 4, True, True, "float32", 0)
    assert case.head_dim == 4
    assert case.case_id == "s/b2-n9-d16-h4-float32-causal-bias"


def test_auto_dtype_is_deduplicated() -> None:
    config = parse_config({"scenarios": [scenario()], "dtype": ["auto", "float32"]}, SOURCE)
    assert len(expand_cases(config, torch.device("cpu"))) == 1


def test_overrides_take_precedence_and_are_validated() -> None:
    config = parse_config({"scenarios": [scenario()], "device": "auto", "implementations": ["naive"]}, SOURCE)
    changed = with_overrides(config, device="cpu", implementations=["fused", "per_head"])
    assert (changed.device, changed.implementations) == ("cpu", ["fused", "per_head"])
    assert with_overrides(config) == config
    with pytest.raises(ConfigError, match=r"^--device: .*'gpu'"):
        with_overrides(config, device="gpu")
    with pytest.raises(UnknownImplementationError, match=r"^--impl: unknown implementation 'nope'; known: "):
        with_overrides(config, implementations=["nope"])


def test_model_dump_round_trips() -> None:
    """The manifest stores ``model_dump``; it must validate back to the same config."""
    config = parse_config(yaml.safe_load(VALID_YAML), SOURCE)
    assert RunConfig.model_validate(config.model_dump(mode="json")) == config
