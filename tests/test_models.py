"""Models as scenarios: the presets, Hugging Face config.json files, the fields they fill, ``mhabench models``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import ConfigError
from mhabench.probe.config import parse_probe_config
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.config import load_config, parse_config
from mhabench.scenario.models import PRESETS, read_config_json

CPU = torch.device("cpu")
CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def run_config(tmp_path: Path, *scenarios: dict[str, Any]) -> Any:
    """Parse a config as if it were the file ``tmp_path/run.yaml`` (config.json paths resolve against tmp_path)."""
    return parse_config({"device": "cpu", "scenarios": list(scenarios)}, str(tmp_path / "run.yaml"))


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


LLAMA_LIKE = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}


# --- presets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("gpt2", (768, 12, 12, 64, True, None, None)),
        ("llama-3.1-8b", (4096, 32, 8, 128, False, None, None)),
        ("llama-3.1-70b", (8192, 64, 8, 128, False, None, None)),
        ("mistral-7b", (4096, 32, 8, 128, False, 4096, None)),
        ("qwen2.5-7b", (3584, 28, 4, 128, True, None, None)),
        ("gemma-2-9b", (3584, 16, 8, 256, False, 4096, 50.0)),
        ("qwen3-8b", (4096, 32, 8, 128, False, None, None)),
    ],
)
def test_presets_hold_the_numbers_of_their_config_json(name: str, shape: tuple[Any, ...]) -> None:
    p = PRESETS[name]
    assert (p.d_model, p.heads, p.kv_heads, p.head_dim, p.bias, p.sliding_window, p.softcap) == shape
    assert p.source.startswith("https://huggingface.co/") and p.source.endswith("/config.json")


def test_every_preset_expands_into_valid_cases() -> None:
    for name in PRESETS:
        (case,) = expand_cases(parse_config({"scenarios": [{"model": name, "seq_len": 16}]}, "m.yaml"), CPU)
        assert case.model == name and case.causal


def test_a_preset_fills_the_shape_mask_and_softcap() -> None:
    (case,) = expand_cases(parse_config({"scenarios": [{"model": "gemma-2-9b", "seq_len": 16}]}, "m.yaml"), CPU)
    assert (case.d_model, case.heads, case.kv_heads, case.head_dim, case.bias) == (3584, 16, 8, 256, False)
    assert (case.mask, case.window, case.score_mod, case.softcap) == ("sliding_window", 4096, "softcap", 50.0)
    assert case.case_id == "scenario/b1-n16-d3584-h16-hd256-kv8-float32-causal-window4096-softcap50"


def test_fields_given_beside_a_model_win_and_may_sweep() -> None:
    data = {"scenarios": [{"model": "llama-3.1-8b", "seq_len": 16, "heads": [32, 16], "bias": True}]}
    cases = expand_cases(parse_config(data, "m.yaml"), CPU)
    assert [(c.heads, c.kv_heads, c.head_dim, c.bias) for c in cases] == [(32, 8, 128, True), (16, 8, 128, True)]
    own_mask = parse_config({"scenarios": [{"model": "gemma-2-9b", "seq_len": 16, "mask": "causal"}]}, "m.yaml")
    (case,) = expand_cases(own_mask, CPU)
    assert (case.mask, case.window, case.score_mod) == ("causal", 0, "softcap")  # the window went with the mask
    bidirectional = parse_config({"scenarios": [{"model": "gpt2", "seq_len": 16, "causal": False}]}, "m.yaml")
    assert not expand_cases(bidirectional, CPU)[0].causal


def test_unknown_preset_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"scenarios": [{"model": "llama3", "seq_len": 16}]}, "m.yaml")
    message = str(caught.value)
    assert message.startswith("m.yaml: scenarios[0].model: unknown model preset 'llama3'; known: gemma-2-9b, gpt2,")
    assert all(name in message for name in PRESETS) and "\n" not in message


def test_model_must_be_a_name_or_a_path() -> None:
    with pytest.raises(ConfigError, match=r"scenarios\[0\]\.model: expected a preset name or a path"):
        parse_config({"scenarios": [{"model": 7, "seq_len": 16}]}, "m.yaml")


# --- config.json ------------------------------------------------------------------------------------


def test_config_json_is_read_relative_to_the_config_file(tmp_path: Path) -> None:
    write_json(tmp_path / "models" / "mine" / "config.json", LLAMA_LIKE | {"head_dim": 64, "attention_bias": True})
    (case,) = expand_cases(run_config(tmp_path, {"model": "models/mine/config.json", "seq_len": 16}), CPU)
    assert (case.d_model, case.heads, case.kv_heads, case.head_dim, case.bias) == (256, 8, 2, 64, True)
    assert case.model == "models/mine/config.json" and case.mask == "causal"


def test_gpt2_style_fields_and_implicit_biases(tmp_path: Path) -> None:
    path = write_json(tmp_path / "config.json", {"model_type": "gpt2", "n_embd": 96, "n_head": 4, "n_positions": 64})
    shape = read_config_json(path, "gpt2-mini")
    assert (shape.d_model, shape.heads, shape.kv_heads, shape.head_dim, shape.bias) == (96, 4, 4, 24, True)
    qwen2 = write_json(tmp_path / "q.json", LLAMA_LIKE | {"model_type": "qwen2", "sliding_window": 4096})
    implicit = read_config_json(qwen2, "q")  # Qwen2's q/k/v biases are in its code, not its config
    assert implicit.bias and implicit.sliding_window == 4096  # no use_sliding_window: false, so the window holds
    off = write_json(tmp_path / "off.json", LLAMA_LIKE | {"sliding_window": 4096, "use_sliding_window": False})
    assert read_config_json(off, "off").sliding_window is None


def test_window_and_softcap_come_from_their_hugging_face_fields(tmp_path: Path) -> None:
    data = LLAMA_LIKE | {"head_dim": 64, "sliding_window": 128, "attn_logit_softcapping": 30.0}
    write_json(tmp_path / "c.json", data | {"query_pre_attn_scalar": 64})
    (case,) = expand_cases(run_config(tmp_path, {"model": "c.json", "seq_len": 16}), CPU)
    assert (case.mask, case.window, case.score_mod, case.softcap) == ("sliding_window", 128, "softcap", 30.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": None}, "hidden_size (or n_embd): missing"),
        ({"num_attention_heads": None}, "num_attention_heads (or n_head): missing"),
        ({"num_key_value_heads": 3}, "num_key_value_heads: 3 does not divide num_attention_heads 8"),
        ({"hidden_size": 100}, "num_attention_heads: 8 does not divide hidden_size 100 (and no head_dim)"),
        ({"head_dim": 0}, "head_dim: 0 is not a positive integer"),
        ({"num_attention_heads": "8"}, "num_attention_heads: '8' is not a positive integer"),
        ({"attention_bias": "yes"}, "attention_bias: 'yes' is not true or false"),
        ({"attn_logit_softcapping": -1}, "attn_logit_softcapping: -1 is not a positive number"),
        ({"query_pre_attn_scalar": 144}, "query_pre_attn_scalar: 144 ≠ head_dim 32; mhabench scales by 1/√head_dim"),
        ({"max_position_embeddings": None}, "max_position_embeddings (or n_positions): missing"),
    ],
)
def test_a_bad_config_json_is_one_line_naming_the_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    data = {key: value for key, value in (LLAMA_LIKE | change).items() if value is not None}
    path = write_json(tmp_path / "bad" / "config.json", data)
    with pytest.raises(ConfigError) as caught:
        run_config(tmp_path, {"model": "bad/config.json", "seq_len": 16})
    assert str(caught.value) == f"{tmp_path / 'run.yaml'}: scenarios[0].model: {path}: {message}"


@pytest.mark.parametrize(
    ("text", "message"), [(None, "no such file"), ("{", "invalid JSON at line 1"), ("[1]", "a JSON object")]
)
def test_a_missing_or_malformed_config_json_is_one_line(tmp_path: Path, text: str | None, message: str) -> None:
    if text is not None:
        (tmp_path / "config.json").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as caught:
        run_config(tmp_path, {"model": "config.json", "seq_len": 16})
    assert "\n" not in str(caught.value) and "config.json" in str(caught.value)


def test_a_probe_file_refuses_a_model() -> None:
    data = {"scenarios": [{"model": "gpt2", "seq_len": 8, "claims": ["var_qk"]}]}
    with pytest.raises(ConfigError, match=r"p.yaml: scenarios\[0\]\.model: a probe takes d_model, heads and head_dim"):
        parse_probe_config(data, "p.yaml")


# --- shipped configs and the command ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["models.yaml", "gpu-models.yaml"])
def test_shipped_model_configs_sweep_several_presets(name: str) -> None:
    cases = expand_cases(load_config(CONFIGS / name), torch.device("cuda" if "gpu" in name else "cpu"))
    assert len({case.model for case in cases}) >= 4
    assert all(len({c.seq_len for c in cases if c.model == model}) >= 3 for model in {c.model for c in cases})


def test_models_command_lists_every_preset() -> None:
    result = CliRunner().invoke(app, ["models"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert all(name in result.output for name in PRESETS)
    markdown = CliRunner().invoke(app, ["models", "--markdown"])
    assert markdown.exit_code == 0
    lines = markdown.output.strip().splitlines()
    assert lines[0].startswith("| preset | d_model | heads | kv_heads | head_dim |")
    assert len(lines) == 2 + len(PRESETS)
    assert "| gemma-2-9b | 3584 | 16 | 8 | 256 * | no | 4096 | 50 | 8192 |" in markdown.output


def test_cli_run_with_an_unknown_preset_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("scenarios:\n  - model: llama-4\n    seq_len: 16\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(config), "--dry-run"])
    assert result.exit_code == 2
    assert "scenarios[0].model: unknown model preset 'llama-4'" in result.output
    assert "Traceback" not in result.output
