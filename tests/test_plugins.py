"""Plugins: a user's file registers itself (``--plugin``) or is named as ``file.py:Class`` in a config."""

from __future__ import annotations

import textwrap
import uuid
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from conftest import TINY_TIMING
from typer.testing import CliRunner

from mhabench import AttentionWeights, Capabilities, build
from mhabench import cost as cost_model
from mhabench import pattern as pattern_module
from mhabench.cli import app
from mhabench.errors import PluginError
from mhabench.impls import get_spec
from mhabench.impls.fused import FusedAttention
from mhabench.impls.reference import numerical_error, reference_attention
from mhabench.pattern import CAUSAL, PLAIN
from mhabench.results.columns import columns_info
from mhabench.results.store import load_run
from mhabench.run import runner
from mhabench.run.steps import parameter_count
from mhabench.scenario.loading import load_config
from mhabench.scenario.plugins import load_plugin

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "my_attention.py"

CLASS_SOURCE = """
import torch
import torch.nn.functional as F
from torch import nn


class {cls}(nn.Module):
    def __init__(self, weights, heads, pattern):
        super().__init__()
        self.weights, self.heads, self.causal = weights, heads, pattern.causal

    def forward(self, x):
        w = self.weights
        q, k, v = (F.linear(x, m.t(), b).unflatten(-1, (self.heads, -1)).transpose(1, 2)
                   for m, b in ((w.w_q, w.b_q), (w.w_k, w.b_k), (w.w_v, w.b_v)))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).flatten(2)
        return F.linear(out, w.w_o.t(), w.b_o)
"""


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def write_config(path: Path, implementations: list[str]) -> Path:
    data = {
        "device": "cpu",
        "implementations": implementations,
        "timing": dict(TINY_TIMING),
        "scenarios": [{"batch": 1, "seq_len": 9, "d_model": 16, "heads": 2, "causal": True, "bias": True}],
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_plugin_file_registers_with_the_decorator(tmp_path: Path, registry_snapshot: None) -> None:
    name, priced = unique("mine_"), unique("priced_")
    source = CLASS_SOURCE.format(cls="Mine") + textwrap.dedent(f"""
        mhabench.register("{name}", description="test plugin")(Mine)
        mhabench.register("{priced}", description="priced", cost=mhabench.cost.FUSED,
                          capabilities=mhabench.Capabilities(grouped_kv=False))(Mine)
    """)
    plugin = tmp_path / "mine.py"
    plugin.write_text("import mhabench\n" + source, encoding="utf-8")
    assert load_plugin(plugin) == [name, priced]
    assert load_plugin(plugin) == [name, priced]  # a second load is the same module, not a duplicate registration
    spec = get_spec(name)
    assert spec.cost is None and not spec.core  # declared no cost model: its modelled columns stay empty
    assert spec.capabilities == Capabilities()
    assert get_spec(priced).cost is cost_model.FUSED and not get_spec(priced).capabilities.grouped_kv
    weights = AttentionWeights.random(16, bias=True)
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        out = build(name, weights, 2, CAUSAL)(x)
    assert numerical_error(out, reference_attention(weights, x, 2, CAUSAL))[1] < 1e-3


def test_run_with_plugin_option_adds_its_implementation(
    tmp_path: Path, registry_snapshot: None, fixed_peaks: object
) -> None:
    name = unique("cli_")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import mhabench\n"
        + CLASS_SOURCE.format(cls="CliAttention")
        + f'\nmhabench.register("{name}", description="cli plugin")(CliAttention)\n',
        encoding="utf-8",
    )
    config = write_config(tmp_path / "cfg.yaml", ["naive"])
    code, output = cli("run", str(config), "--plugin", str(plugin), "--out", str(tmp_path / "out"))
    assert code == 0, output
    (run_dir,) = (tmp_path / "out").iterdir()
    csv = (run_dir / "results.csv").read_text(encoding="utf-8")
    assert f",{name}," in csv and ",naive," in csv


def test_config_class_entry_relative_to_the_config(tmp_path: Path, registry_snapshot: None) -> None:
    cls = unique("Entry")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "entry.py").write_text(CLASS_SOURCE.format(cls=cls), encoding="utf-8")
    config = load_config(write_config(tmp_path / "cfg.yaml", ["naive", f"plugins/entry.py:{cls}"]))
    assert config.implementations == ["naive", cls]
    assert get_spec(cls).cost is None  # a bare class declares no cost model: no borrowed figures
    assert load_config(tmp_path / "cfg.yaml").implementations == ["naive", cls]  # loading twice is fine


def test_class_entry_is_measured_with_empty_modelled_columns(
    tmp_path: Path, registry_snapshot: None, fixed_peaks: object
) -> None:
    """``file.py:Class`` declares no cost model: measured columns are filled, nothing is borrowed from fused."""
    cls = unique("Bare")
    (tmp_path / "bare.py").write_text(CLASS_SOURCE.format(cls=cls), encoding="utf-8")
    config = load_config(write_config(tmp_path / "cfg.yaml", ["naive", f"bare.py:{cls}"]))
    result = runner.run(config, tmp_path / "out")
    assert [(r.case.impl, r.status) for r in result.rows] == [("naive", "ok"), (cls, "ok")]
    assert result.rows[1].cost is None
    rows = load_run(result.run_dir).frame.set_index("impl")
    modelled = [info.name for info in columns_info() if info.role == "modelled"]
    assert rows.loc[cls, modelled].isna().all()
    assert rows.loc["naive", modelled].notna().all()
    # no cost model, yet a roofline: its FLOPs and bytes are counted from the ops it dispatched
    placed = ["achieved_tflops", "achieved_gbps", "roofline_bound", "attainable_tflops", "roofline_efficiency"]
    assert rows.loc[cls, placed].notna().all() and rows.loc[cls, "intensity_source"] == "measured"
    assert rows.loc[cls, "measured_flops"] == rows.loc["naive", "measured_flops"]
    assert pd.isna(rows.loc[cls, "model_disagreement"]) and pd.isna(rows.loc[cls, "achieved_useful_tflops"])
    assert rows.loc[cls, "latency_ms"] > 0 and rows.loc[cls, "tokens_per_s"] > 0
    assert rows.loc[cls, "max_rel_err"] < 1e-3


def test_example_plugin_is_a_working_plugin(registry_snapshot: None) -> None:
    assert load_plugin(EXAMPLE) == ["my_attention"]
    spec = get_spec("my_attention")
    assert spec.cost is cost_model.FUSED and not spec.capabilities.grouped_kv
    weights = AttentionWeights.random(16)
    x = torch.randn(1, 5, 16)
    module = build("my_attention", weights, 4, PLAIN)
    assert parameter_count(module) == weights.parameter_count()  # its weights are the module's parameters
    with torch.no_grad():
        out = module(x)
    assert numerical_error(out, reference_attention(weights, x, 4, PLAIN))[1] < 1e-3


@pytest.mark.parametrize(
    ("source", "entry", "message"),
    [
        (None, "missing.py:Nope", "missing.py: no such plugin file"),
        ("def broken(:\n", "broken.py:Broken", "broken.py: syntax error at line 1"),
        ("raise ValueError('boom')\n", "raises.py:X", "raises.py: importing it raised ValueError: boom"),
        ("class Other:\n    pass\n", "noclass.py:Wanted", "noclass.py: no class 'Wanted' in the plugin"),
        (
            "class Wrong:\n    def __init__(self, x):\n        pass\n",
            "wrong.py:Wrong",
            "must take (weights, heads, pattern)",
        ),
    ],
    ids=["missing-file", "syntax-error", "import-raises", "missing-class", "wrong-signature"],
)
def test_bad_config_entry_exits_2_with_one_line(
    tmp_path: Path, registry_snapshot: None, source: str | None, entry: str, message: str
) -> None:
    file_name = entry.split(":")[0]
    if source is not None:
        (tmp_path / file_name).write_text(source, encoding="utf-8")
    config = write_config(tmp_path / "cfg.yaml", [entry])
    code, output = cli("run", str(config), "--out", str(tmp_path / "out"))
    assert code == 2
    assert message in output and "implementations[0]" in output
    assert "Traceback" not in output
    with pytest.raises(PluginError):
        load_config(config)


def test_bad_plugin_option_exits_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken_option.py"
    broken.write_text(textwrap.dedent("x = (\n"), encoding="utf-8")
    for path, message in [(tmp_path / "absent.py", "absent.py: no such plugin file"), (broken, "syntax error")]:
        code, output = cli("run", "--plugin", str(path), "--dry-run")
        assert code == 2, output
        assert message in output and "Traceback" not in output


# --- the bool causal of plugins written before patterns: still works, deprecated -------------------------------

LEGACY_SOURCE = CLASS_SOURCE.replace(
    "def __init__(self, weights, heads, pattern):", "def __init__(self, weights, heads, causal):"
)
LEGACY_SOURCE = LEGACY_SOURCE.replace("pattern.causal", "causal")


@pytest.fixture
def fresh_deprecations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deprecations are said once per process: forget the ones earlier tests already said."""
    monkeypatch.setattr(pattern_module, "_SAID", set())


def test_a_plugin_taking_a_bool_causal_still_runs_and_is_deprecated(
    tmp_path: Path, registry_snapshot: None, fresh_deprecations: None
) -> None:
    name = unique("legacy_")
    plugin = tmp_path / "legacy.py"
    plugin.write_text(
        "import mhabench\n"
        + LEGACY_SOURCE.format(cls="Legacy")
        + f'\nmhabench.register("{name}", description="x")(Legacy)\n',
        encoding="utf-8",
    )
    with pytest.warns(DeprecationWarning, match=r"take \(weights, heads, pattern\)"):
        assert load_plugin(plugin) == [name]
    assert get_spec(name).bool_causal
    weights, x = AttentionWeights.random(16, bias=True), torch.randn(2, 9, 16)
    with torch.no_grad():
        causal, plain = build(name, weights, 2, CAUSAL), build(name, weights, 2, PLAIN)
        assert causal.causal is True and plain.causal is False  # the bool it was written for, not a pattern
        assert numerical_error(causal(x), reference_attention(weights, x, 2, CAUSAL))[1] < 1e-3
        assert numerical_error(plain(x), reference_attention(weights, x, 2, PLAIN))[1] < 1e-3


def test_a_plugin_taking_a_pattern_gets_the_pattern_without_a_warning(
    tmp_path: Path, registry_snapshot: None, fresh_deprecations: None
) -> None:
    name = unique("current_")
    plugin = tmp_path / "current.py"
    plugin.write_text(
        "import mhabench\n"
        + CLASS_SOURCE.format(cls="Current")
        + f'\nmhabench.register("{name}", description="x")(Current)\n',
        encoding="utf-8",
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        load_plugin(plugin)
        assert not get_spec(name).bool_causal
        assert build(name, AttentionWeights.random(16), 2, CAUSAL).causal is True


def test_build_with_a_bool_causal_works_and_warns_once(fresh_deprecations: None) -> None:
    weights, x = AttentionWeights.random(16, seed=3), torch.randn(1, 6, 16)
    with pytest.warns(DeprecationWarning, match="causal=True/False is deprecated: pass an"):
        old = build("fused", weights, 2, causal=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # said once: the second bool is quiet
        positional = build("naive", weights, 2, True)  # type: ignore[arg-type]
    with torch.no_grad():
        torch.testing.assert_close(old(x), build("fused", weights, 2, CAUSAL)(x))
        torch.testing.assert_close(positional(x), build("naive", weights, 2, CAUSAL)(x))
        assert not torch.allclose(old(x), build("fused", weights, 2, PLAIN)(x))  # the bool was read, not dropped


def test_a_built_in_layer_built_with_a_bool_is_the_pattern_layer(fresh_deprecations: None) -> None:
    """A plugin subclassing a built-in layer and passing its bool on still gets a pattern inside."""
    with pytest.warns(DeprecationWarning):
        layer = FusedAttention(AttentionWeights.random(16), 2, True)  # type: ignore[arg-type]
    assert layer.pattern == CAUSAL and layer.causal
