"""Models as scenarios: the presets, Hugging Face config.json files, the fields they fill, ``mhabench models``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import ConfigError
from mhabench.probe.config import parse_probe_config
from mhabench.scenario.cases import covered_windows, expand_cases
from mhabench.scenario.loading import load_config, parse_config
from mhabench.scenario.models import PRESETS, read_config_json
from mhabench.views.models import _cells, models_view

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
    (case,) = expand_cases(parse_config({"scenarios": [{"model": "gemma-2-9b", "seq_len": 8192}]}, "m.yaml"), CPU)
    assert (case.d_model, case.heads, case.kv_heads, case.head_dim, case.bias) == (3584, 16, 8, 256, False)
    assert (case.pattern.mask, case.pattern.window, case.pattern.score_mod, case.pattern.softcap) == (
        "sliding_window",
        4096,
        "softcap",
        50.0,
    )
    assert case.case_id == "scenario/b1-n8192-d3584-h16-hd256-kv8-float32-causal-window4096-softcap50"


def test_fields_given_beside_a_model_win_and_may_sweep() -> None:
    data = {"scenarios": [{"model": "llama-3.1-8b", "seq_len": 16, "heads": [32, 16], "bias": True}]}
    cases = expand_cases(parse_config(data, "m.yaml"), CPU)
    assert [(c.heads, c.kv_heads, c.head_dim, c.bias) for c in cases] == [(32, 8, 128, True), (16, 8, 256, True)]
    own_mask = parse_config({"scenarios": [{"model": "gemma-2-9b", "seq_len": 16, "mask": "causal"}]}, "m.yaml")
    (case,) = expand_cases(own_mask, CPU)
    assert (case.pattern.mask, case.pattern.window, case.pattern.score_mod) == (
        "causal",
        None,
        "softcap",
    )  # the window went with the mask
    bidirectional = parse_config({"scenarios": [{"model": "gpt2", "seq_len": 16, "causal": False}]}, "m.yaml")
    assert not expand_cases(bidirectional, CPU)[0].causal


def test_head_dim_follows_an_overridden_width_unless_the_model_sets_it_apart() -> None:
    narrow = {"model": "llama-3.1-8b", "seq_len": 16, "d_model": 1024}
    (case,) = expand_cases(parse_config({"scenarios": [narrow]}, "m.yaml"), CPU)
    assert (case.d_model, case.heads, case.head_dim, case.kv_heads) == (1024, 32, 32, 8)
    assert case.case_id == "scenario/b1-n16-d1024-h32-kv8-float32-causal"  # no 4096-wide query on a 1024 model
    qwen3 = {"model": "qwen3-8b", "seq_len": 16, "d_model": 2048}  # states head_dim 128 = 4096 / 32: not apart
    assert expand_cases(parse_config({"scenarios": [qwen3]}, "m.yaml"), CPU)[0].head_dim == 64
    gemma = {"model": "gemma-2-9b", "seq_len": 16, "d_model": 1024, "heads": 8}  # 256 is Gemma's own width
    (case,) = expand_cases(parse_config({"scenarios": [gemma]}, "m.yaml"), CPU)
    assert (case.d_model, case.heads, case.head_dim, case.kv_heads) == (1024, 8, 256, 8)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"heads": 12}, "heads 12 is not divisible by llama-3.1-8b's kv_heads 8; set kv_heads too"),
        ({"kv_heads": 3}, "llama-3.1-8b's heads 32 is not divisible by kv_heads 3; set heads too"),
        ({"d_model": 1000}, "d_model 1000 is not divisible by llama-3.1-8b's heads 32; set heads (or head_dim) too"),
        ({"heads": [16, 24], "kv_heads": 8}, "llama-3.1-8b's d_model 4096 is not divisible by heads 24; set d_model"),
    ],
)
def test_a_size_that_does_not_divide_with_the_models_names_the_model(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"scenarios": [{"model": "llama-3.1-8b", "seq_len": 16} | fields]}, "m.yaml")
    assert str(caught.value).startswith(f"m.yaml: scenarios[0].model: {message}")
    assert "\n" not in str(caught.value)


def test_with_lengths_a_models_causal_mask_is_document() -> None:
    data = {"scenarios": [{"model": "llama-3.1-8b", "seq_len": 16, "lengths": [4, 16]}]}
    (case,) = expand_cases(parse_config(data, "m.yaml"), CPU)
    assert (case.pattern.mask, case.lengths, case.causal) == ("document", "4.16", True)
    windowed = {"scenarios": [{"model": "mistral-7b", "seq_len": 16, "lengths": [4, 16], "layout": "packed"}]}
    (case,) = expand_cases(parse_config(windowed, "m.yaml"), CPU)
    # 4096 covers every 16-token document whole: causal within each document, no window
    assert (case.pattern.mask, case.pattern.window, case.pattern.layout) == ("document", None, "packed")
    own = {"scenarios": [{"model": "llama-3.1-8b", "seq_len": 16, "lengths": [4, 16], "mask": "none"}]}
    assert expand_cases(parse_config(own, "m.yaml"), CPU)[0].pattern.mask == "none"


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
    assert case.model == "models/mine/config.json" and case.pattern.mask == "causal"


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
    (case,) = expand_cases(run_config(tmp_path, {"model": "c.json", "seq_len": 256}), CPU)
    assert (case.pattern.mask, case.pattern.window, case.pattern.score_mod, case.pattern.softcap) == (
        "sliding_window",
        128,
        "softcap",
        30.0,
    )


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
        ({"max_position_embeddings": 0}, "max_position_embeddings: 0 is not a positive integer"),
        ({"attn_logit_softcapping": 1e9}, "attn_logit_softcapping: 1000000000.0 is above 1e+06, the most a scenario"),
        ({"sliding_window": 2_000_000}, "sliding_window: 2000000 is above 1048576, the most a scenario takes"),
        ({"head_dim": 100_000}, "head_dim: 100000 is above 16384, the most a scenario takes"),
        ({"hidden_size": 70_000}, "hidden_size: 70000 is above 65536, the most a scenario takes"),
        ({"num_key_value_heads": 2048}, "num_key_value_heads: 2048 is above 1024, the most a scenario takes"),
    ],
)
def test_a_bad_config_json_is_one_line_naming_the_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    data = {key: value for key, value in (LLAMA_LIKE | change).items() if value is not None}
    path = write_json(tmp_path / "bad" / "config.json", data)
    with pytest.raises(ConfigError) as caught:
        run_config(tmp_path, {"model": "bad/config.json", "seq_len": 16})
    assert str(caught.value).startswith(f"{tmp_path / 'run.yaml'}: scenarios[0].model: {path}: {message}")
    assert "\n" not in str(caught.value)


def test_max_position_embeddings_is_optional_and_shown_as_a_dash(tmp_path: Path) -> None:
    data = {key: value for key, value in LLAMA_LIKE.items() if key != "max_position_embeddings"}
    shape = read_config_json(write_json(tmp_path / "config.json", data), "no-context")
    assert shape.max_position is None and (shape.d_model, shape.heads) == (256, 8)
    assert _cells(shape)[8] == "—"
    (case,) = expand_cases(run_config(tmp_path, {"model": "config.json", "seq_len": 16}), CPU)
    assert case.d_model == 256


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


@pytest.mark.parametrize("width", [80, 100, 160])
def test_models_fit_a_terminal_with_every_source_url_whole_on_one_line(width: int) -> None:
    """At 100 columns each preset's source URL was folded over ~11 lines of its table cell."""
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(models_view(width))
    lines = console.file.getvalue().splitlines()
    assert max(cell_len(line) for line in lines) <= width
    for name, model in PRESETS.items():
        assert any(line.strip() == model.source or line.strip().endswith(f" {model.source}") for line in lines)
        assert any(line.startswith(f"│ {name} ") for line in lines)
    assert len(lines) <= 16 + 2 * len(PRESETS), "a table of 7 rows, its caption, one or two lines per source"
    header = next(line for line in lines if line.startswith("┃ preset"))
    assert ("context" in header) == (width >= 100), "a column left out only where the terminal is too narrow"
    words = " ".join(" ".join(lines).split())
    assert (f"Not shown at {width} columns: softcap, context" in words) == (width < 100)


def test_cli_run_with_an_unknown_preset_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("scenarios:\n  - model: llama-4\n    seq_len: 16\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", str(config), "--dry-run"])
    assert result.exit_code == 2
    assert "scenarios[0].model: unknown model preset 'llama-4'" in result.output
    assert "Traceback" not in result.output


def test_a_presets_window_over_a_short_sequence_runs_as_plain_causal_and_says_so() -> None:
    """Issue 29: mistral-7b at n=64 was a windowed case (a dense mask for fused) though the window had no effect."""
    config = parse_config({"scenarios": [{"name": "m", "model": "mistral-7b", "seq_len": [64, 8192]}]}, "m.yaml")
    cases = {case.seq_len: case for case in expand_cases(config, CPU)}
    assert (cases[64].pattern.mask, cases[64].pattern.window) == ("causal", None)
    assert (cases[8192].pattern.mask, cases[8192].pattern.window) == ("sliding_window", 4096)
    (note,) = covered_windows(config)
    assert (
        note
        == "scenario 'm': mistral-7b's window 4096 covers the whole sequence at n=64: run as plain causal attention"
    )
