"""Probe files: the scenario fields of ``mhabench run`` plus claims, one-line errors with exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import ConfigError
from mhabench.probe.config import expand, load_probe_config, parse_probe_config

SCENARIO = {"name": "s", "seq_len": 16, "d_model": 32, "heads": [4, 2], "claims": ["var_qk", "rank"]}


def _parse(**changes: Any) -> Any:
    return parse_probe_config({"scenarios": [SCENARIO | changes]}, "p.yaml")


def test_a_scenario_sweeps_like_mhabench_run() -> None:
    config = _parse(seq_len=[8, 16], samples=3)
    cases = expand(config.scenarios[0])
    assert config.name == "p"  # the file's stem
    assert [(c.seq_len, c.heads, c.head_dim) for c in cases] == [(8, 4, 8), (8, 2, 16), (16, 4, 8), (16, 2, 16)]
    assert cases[0].samples == 3 and cases[0].claims == ("var_qk", "rank")
    assert cases[0].case_id == "s/b1-n8-d32-h4"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"claims": ["var_qk", "saturaton"]}, "scenarios[0].claims: Input should be 'var_qk', 'saturation'"),
        ({"claimz": ["rank"]}, "scenarios[0].claimz: unknown field; did you mean 'claims'?"),
        ({"claims": []}, "scenarios[0].claims: List should have at least 1 item"),
        ({"heads": 5}, "scenarios[0].heads: d_model 32 is not divisible by heads 5"),
        ({"causal": True}, "causal: a probe measures bidirectional prefill attention; leave causal out"),
        ({"mode": "train"}, "mode: a probe measures bidirectional prefill attention"),
        ({"samples": 0}, "scenarios[0].samples: Input should be greater than or equal to 1 (got 0)"),
        ({"weights": {"path": "w.safetensors", "qvk": "x"}}, "scenarios[0].weights.qvk: unknown field; did you mean"),
        (
            {"weights": {"path": "w.safetensors"}, "bias": True},
            "bias, kv_heads and head_dim come from the weights file",
        ),
    ],
)
def test_bad_fields_are_one_line_naming_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        _parse(**changes)
    assert str(error.value).startswith("p.yaml: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_weights_path_is_relative_to_the_file(tmp_path: Path) -> None:
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump({"scenarios": [SCENARIO | {"weights": {"path": "w.safetensors"}}]}), "utf-8")
    assert load_probe_config(path).scenarios[0].weights.path == tmp_path / "w.safetensors"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scenarios: [", "invalid YAML at line 1"),
        ("", "expected a mapping of fields, got nothing"),
        ("- 1", "expected a mapping of fields, got list"),
    ],
)
def test_unreadable_files_exit_2_with_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["probe", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # nothing is written before the file is valid


def test_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["probe", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "nope.yaml: no such file" in result.output
