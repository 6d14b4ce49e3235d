"""The ``hf_*`` peers: transformers' own attention functions on ``fused``'s packed projections.

Needs transformers (the ``hf`` extra, which ``make test`` installs); the tests that simulate its
absence run either way.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from conftest import FIXED_PEAKS, TINY_TIMING
from plain_cases import plain_case

from mhabench import AttentionWeights, build
from mhabench.errors import UnsupportedError
from mhabench.impls import core_implementations, get_spec
from mhabench.impls.hf_attention import HF_IMPLEMENTATIONS, SUPPORTED_TRANSFORMERS, mask_factory, release
from mhabench.impls.reference import TOLERANCE, numerical_error, reference_attention
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.measure.environment import environment
from mhabench.pattern import CAUSAL, PLAIN, AttentionPattern, TokenTable, allowed
from mhabench.run import runner
from mhabench.scenario.cases import expand_cases
from mhabench.scenario.loading import load_config, parse_config

needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers not installed (pip install '.[hf]')"
)
CPU_HF = ["hf_eager", "hf_sdpa", "hf_flex_attention"]
FLASH_HF = ["hf_flash_attention_2", "hf_flash_attention_3"]


def inputs(d_model: int, kv_dim: int, bias: bool, dtype: torch.dtype) -> tuple[AttentionWeights, torch.Tensor]:
    weights = AttentionWeights.random(d_model, bias=bias, seed=5, dtype=dtype, kv_dim=kv_dim)
    x = torch.randn(2, 11, d_model, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(dtype)
    return weights, x


# --- registration -----------------------------------------------------------------------------------


def test_every_attn_implementation_value_is_registered_opt_in() -> None:
    assert [*CPU_HF, *FLASH_HF] == HF_IMPLEMENTATIONS
    for name in HF_IMPLEMENTATIONS:
        spec = get_spec(name)
        assert not spec.core and name not in core_implementations()
        assert f'attn_implementation="{name.removeprefix("hf_")}"' in spec.description
        assert "transformers" in spec.capabilities.requires
        assert spec.capabilities.grouped_kv and spec.capabilities.train and not spec.capabilities.decode
    assert [get_spec(name).compiles for name in HF_IMPLEMENTATIONS] == [False, False, True, False, False]


@pytest.mark.parametrize("name", HF_IMPLEMENTATIONS)
def test_each_choice_declares_a_window_and_softcap_only_where_its_function_takes_them(name: str) -> None:
    """A window everywhere (a mask, or flash's sliding_window); soft-cap everywhere but SDPA, whose function
    drops the keyword; no documents, prefix-LM or ALiBi (transformers' functions have no such argument)."""
    capabilities = get_spec(name).capabilities
    assert capabilities.masks == frozenset({"none", "causal", "sliding_window"})
    assert capabilities.score_mods == ({"none"} if name == "hf_sdpa" else {"none", "softcap"})
    assert not capabilities.layouts and not capabilities.decode_window


def test_importing_mhabench_does_not_import_transformers() -> None:
    code = "import sys, mhabench.impls; print('transformers' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert shown.strip() == "False"


@pytest.mark.parametrize(("name", "package"), [("hf_flash_attention_2", "flash_attn"), ("hf_flash_attention_3", "")])
def test_flash_choices_run_on_cuda_half_precision_only(name: str, package: str) -> None:
    capabilities = get_spec(name).capabilities
    assert capabilities.devices == frozenset({"cuda"})
    assert capabilities.dtypes == frozenset({"float16", "bfloat16"})
    assert capabilities.requires[1] == (package or "flash_attn_interface")
    grouped = plain_case("t", 1, 8, 64, 4, kv_heads=2).workload()
    reason = capabilities.unsupported_reason(name, grouped, dtype="float32", device_type="cpu")
    assert reason is not None and reason.startswith(f"{name}: ")


# --- installed by make test ---------------------------------------------------------------------------


def dry_make(target: str, venv: Path) -> list[str]:
    """The commands ``make -n target`` would run against a throwaway venv."""
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", str(root), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_test_installs_the_hf_extra_and_make_run_does_not(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    assert any('-e ".[dev,hf,cluster]"' in line for line in dry_make("test", venv))
    assert not any(",hf" in line for line in dry_make("run", venv))
    venv.mkdir()
    for stamp in [line.split()[-1] for line in dry_make("test", venv) if line.startswith("touch ")]:
        Path(stamp).touch()
    assert not any("pip install" in line for line in dry_make("hf", venv))  # up to date
    Path(stamp).unlink()  # the hf stamp is the last one touched; gone, as after a setup that reinstalled
    assert any('-e ".[dev,hf,cluster]"' in line for line in dry_make("hf", venv))


# --- transformers missing or unsupported ----------------------------------------------------------


@pytest.mark.parametrize("name", HF_IMPLEMENTATIONS)
def test_missing_transformers_is_an_unsupported_reason_naming_it(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda package, *a: None if package == "transformers" else real_find_spec(package)
    )
    reason = get_spec(name).capabilities.unsupported_reason(
        name, plain_case("t", 1, 8, 64, 4).workload(), dtype="bfloat16", device_type="cuda"
    )
    assert reason is not None and reason.startswith(f"{name}: transformers")
    assert "not installed (make hf installs it" in reason  # issue 29: the row says what to run


@pytest.mark.parametrize("name", CPU_HF)
def test_building_without_transformers_is_unsupported(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import raises ImportError
    with pytest.raises(UnsupportedError, match=r"^transformers: not installed"):
        build(name, AttentionWeights.random(16, seed=1), 2, CAUSAL)


@needs_transformers
@pytest.mark.parametrize("version", ["4.56.2", "5.19.0"])
def test_a_release_outside_the_supported_range_is_unsupported(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    import transformers

    monkeypatch.setattr(transformers, "__version__", version)
    with pytest.raises(UnsupportedError, match=rf"transformers {version} is outside the supported 4\.57 to 5\.18"):
        build("hf_sdpa", AttentionWeights.random(16, seed=1), 2, CAUSAL)


def test_release_reads_major_and_minor() -> None:
    assert release("4.57.6") == (4, 57)
    assert release("5.18.0.dev0") == (5, 18)
    assert release("5.19rc1") == (5, 19)
    assert release("main") == (0, 0)
    assert SUPPORTED_TRANSFORMERS == ((4, 57), (5, 19))


# --- the mask call across releases ------------------------------------------------------------------


def test_mask_factory_speaks_the_4x_signature() -> None:
    """4.57 names the input ``input_embeds``, wants ``cache_position`` and has no bidirectional helper."""
    seen: dict[str, Any] = {}

    def create_causal_mask(config, input_embeds, attention_mask, cache_position, past_key_values, position_ids=None):
        seen.update(inspect.getcallargs(create_causal_mask, config, input_embeds, attention_mask, cache_position, None))
        return "mask"

    old = types.SimpleNamespace(create_causal_mask=create_causal_mask, create_sliding_window_causal_mask=print)
    x = torch.zeros(2, 5, 8)
    assert mask_factory(old, "causal")("config", x) == "mask"
    assert seen["input_embeds"] is x and seen["attention_mask"] is None and seen["past_key_values"] is None
    assert seen["cache_position"].tolist() == [0, 1, 2, 3, 4]
    assert mask_factory(old, "none")("config", x) is None


def test_mask_factory_builds_a_window_with_the_sliding_window_utility() -> None:
    calls: list[str] = []
    utilities = types.SimpleNamespace(
        create_causal_mask=lambda **kwargs: calls.append("causal"),
        create_sliding_window_causal_mask=lambda config, inputs_embeds, attention_mask, past_key_values: calls.append(
            "sliding"
        ),
    )
    mask_factory(utilities, "sliding_window")("config", torch.zeros(1, 3, 4))
    assert calls == ["sliding"]


@needs_transformers
@pytest.mark.parametrize(
    ("name", "causal", "kind"),
    [
        ("hf_eager", True, "float"),
        ("hf_eager", False, "none"),
        ("hf_sdpa", True, "none"),
        ("hf_sdpa", False, "none"),
        ("hf_flex_attention", True, "block"),
    ],
)
def test_each_choice_gets_the_mask_transformers_builds_for_it(name: str, causal: bool, kind: str) -> None:
    module = build(name, AttentionWeights.random(16, seed=1), 2, CAUSAL if causal else PLAIN)
    mask = module.create_mask(module.config, torch.zeros(1, 6, 16))
    if kind == "none":
        assert mask is None
    elif kind == "float":
        assert mask.shape == (1, 1, 6, 6) and mask.dtype == torch.float32
        hidden = torch.ones(6, 6, dtype=torch.bool).triu(1)
        assert (mask[0, 0][hidden] < -1e30).all() and (mask[0, 0][~hidden] == 0).all()
    else:
        assert type(mask).__name__ == "BlockMask"


WINDOW = AttentionPattern(mask="sliding_window", window=3)


@needs_transformers
def test_hf_sliding_window_counts_the_keys_as_our_window_does() -> None:
    """transformers' ``sliding_window = w`` hides exactly what our ``window: w`` hides (w keys, itself included),
    so the value passes through untranslated."""
    module = build("hf_eager", AttentionWeights.random(16, seed=1), 2, WINDOW)
    assert module.config.sliding_window == 3
    mask = module.create_mask(module.config, torch.zeros(1, 7, 16))
    ours = allowed(WINDOW, TokenTable.of([[7]], "cpu"))[0]
    assert mask.shape == (1, 1, 7, 7)
    assert torch.equal(mask[0, 0] == 0, ours)
    assert ours.sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3]


@needs_transformers
def test_sdpa_gets_a_window_as_a_boolean_mask_and_none_when_the_window_covers_the_row() -> None:
    module = build("hf_sdpa", AttentionWeights.random(16, seed=1), 2, WINDOW)
    mask = module.create_mask(module.config, torch.zeros(1, 7, 16))
    assert mask.dtype == torch.bool
    assert torch.equal(mask.reshape(7, 7), allowed(WINDOW, TokenTable.of([[7]], "cpu"))[0])
    assert module.create_mask(module.config, torch.zeros(1, 2, 16)) is None  # fewer keys than the window: is_causal


@needs_transformers
def test_flex_gets_a_window_as_a_block_mask() -> None:
    module = build("hf_flex_attention", AttentionWeights.random(16, seed=1), 2, WINDOW)
    mask = module.create_mask(module.config, torch.zeros(1, 7, 16))
    assert type(mask).__name__ == "BlockMask"
    positions = torch.arange(7)  # seven tokens are one partial block: what it hides is in its mask function
    visible = mask.mask_mod(torch.tensor(0), torch.tensor(0), positions[:, None], positions[None, :])
    assert torch.equal(visible, allowed(WINDOW, TokenTable.of([[7]], "cpu"))[0])


GEMMA_LIKE = AttentionPattern(mask="sliding_window", window=4, score_mod="softcap", softcap=2.0)


@needs_transformers
@pytest.mark.parametrize("name", FLASH_HF)
def test_flash_gets_the_window_and_softcap_as_gemma_2_passes_them(name: str) -> None:
    """No flash kernel on the CPU, so the function is a recorder: no mask tensor, is_causal on the layer,
    ``sliding_window`` and ``softcap`` as keywords (transformers turns them into window_size and softcap)."""
    module = build(name, AttentionWeights.random(16, seed=1, kv_dim=8), 4, GEMMA_LIKE)
    seen: dict[str, Any] = {}

    def recorder(layer: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any, **kwargs: Any) -> Any:
        seen.update(kwargs, mask=mask, causal=layer.is_causal, groups=layer.num_key_value_groups)
        return q.transpose(1, 2), None

    module.attention_function = recorder
    assert module(torch.zeros(2, 6, 16)).shape == (2, 6, 16)
    assert seen == {
        "mask": None,
        "causal": True,
        "groups": 2,
        "dropout": 0.0,
        "scaling": 0.5,
        "sliding_window": 4,
        "softcap": 2.0,
    }


@pytest.mark.parametrize(
    ("name", "pattern", "shown"),
    [
        ("hf_sdpa", AttentionPattern(mask="causal", score_mod="softcap", softcap=50.0), "causal+softcap(50)"),
        ("hf_eager", AttentionPattern(mask="prefix_lm", prefix=2), "prefix_lm(2)"),
        ("hf_flex_attention", AttentionPattern(mask="causal", score_mod="alibi"), "causal+alibi"),
        ("hf_eager", AttentionPattern(mask="document", lengths=(3, 5)), "document over documents"),
    ],
)
def test_building_a_pattern_no_transformers_call_runs_is_unsupported(
    name: str, pattern: AttentionPattern, shown: str
) -> None:
    """Refused before transformers is imported: a function would otherwise ignore what it cannot take."""
    with pytest.raises(UnsupportedError, match=rf"^{name}: transformers' \w+ call cannot run {re.escape(shown)}$"):
        build(name, AttentionWeights.random(16, seed=1), 2, pattern)


# --- numerics -------------------------------------------------------------------------------------


@needs_transformers
@pytest.mark.parametrize("name", ["hf_eager", "hf_sdpa"])
@pytest.mark.parametrize(("causal", "kv_dim", "bias"), [(True, 32, False), (False, 32, True), (True, 8, True)])
def test_float32_matches_the_reference_and_fused(name: str, causal: bool, kv_dim: int, bias: bool) -> None:
    weights, x = inputs(32, kv_dim, bias, torch.float32)
    with torch.no_grad():
        out = build(name, weights, 4, CAUSAL if causal else PLAIN)(x)
        fused = build("fused", weights, 4, CAUSAL if causal else PLAIN)(x)
    reference = reference_attention(weights.to(torch.float64), x.double(), 4, CAUSAL if causal else PLAIN)
    assert numerical_error(out, reference)[1] < TOLERANCE["float32"]
    torch.testing.assert_close(out, fused, rtol=1e-5, atol=1e-5)


@needs_transformers
@pytest.mark.parametrize("name", ["hf_eager", "hf_sdpa"])
def test_bfloat16_runs_within_its_tolerance(name: str) -> None:
    weights, x = inputs(32, 16, False, torch.bfloat16)
    with torch.no_grad():
        out = build(name, weights, 4, CAUSAL)(x)
    assert out.dtype == torch.bfloat16
    reference = reference_attention(weights.to(torch.float64), x.double(), 4, CAUSAL)
    assert numerical_error(out, reference)[1] < TOLERANCE["bfloat16"]


@needs_transformers
def test_hf_sdpa_is_fused_bit_for_bit_when_no_mask_tensor_is_made() -> None:
    """sdpa gets no mask (is_causal instead) and GQA via enable_gqa, so it is the same SDPA call as fused."""
    weights, x = inputs(32, 8, True, torch.float32)
    with torch.no_grad():
        assert torch.equal(build("hf_sdpa", weights, 4, CAUSAL)(x), build("fused", weights, 4, CAUSAL)(x))


PATTERNS = {
    "window": AttentionPattern(mask="sliding_window", window=5),
    "softcap": AttentionPattern(mask="causal", score_mod="softcap", softcap=2.0),
    "window+softcap": AttentionPattern(mask="sliding_window", window=4, score_mod="softcap", softcap=2.0),
    "bidirectional softcap": AttentionPattern(score_mod="softcap", softcap=2.0),
}


@needs_transformers
@pytest.mark.parametrize(
    ("name", "pattern"),
    [("hf_eager", pattern) for pattern in PATTERNS] + [("hf_sdpa", "window")],
)
@pytest.mark.parametrize("kv_dim", [32, 16], ids=["mha", "gqa"])
def test_float32_patterns_match_the_reference_and_naive(name: str, pattern: str, kv_dim: int) -> None:
    weights, x = inputs(32, kv_dim, True, torch.float32)
    with torch.no_grad():
        out = build(name, weights, 4, PATTERNS[pattern])(x)
        naive = build("naive", weights, 4, PATTERNS[pattern])(x)
    reference = reference_attention(weights.to(torch.float64), x.double(), 4, PATTERNS[pattern])
    assert numerical_error(out, reference)[1] < TOLERANCE["float32"]
    torch.testing.assert_close(out, naive, rtol=1e-5, atol=1e-5)


@needs_transformers
def test_a_softcap_reaches_the_scores_only_through_gemma_2s_eager() -> None:
    """Llama's eager takes ``softcap=`` into its ``**kwargs`` and drops it: with it the row would be wrong, so
    the soft-cap check can fail and the family choice is what makes it pass."""
    from transformers.models.llama.modeling_llama import eager_attention_forward

    weights, x = inputs(32, 16, False, torch.float32)
    module = build("hf_eager", weights, 4, PATTERNS["softcap"])
    reference = reference_attention(weights.to(torch.float64), x.double(), 4, PATTERNS["softcap"])
    with torch.no_grad():
        assert numerical_error(module(x), reference)[1] < TOLERANCE["float32"]
        module.attention_function = eager_attention_forward
        assert numerical_error(module(x), reference)[1] > 100 * TOLERANCE["float32"]


# --- through the runner: ok rows on the CPU -----------------------------------------------------


@pytest.fixture(scope="module")
def hf_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pd.DataFrame]:
    """One run in float32 and bfloat16: causal GQA with bias, non-causal MHA, and causal GQA training."""
    base = {"batch": 1, "seq_len": 12, "d_model": 32, "heads": 4}
    config = parse_config(
        {
            "name": "hf",
            "device": "cpu",
            "threads": 1,
            "dtype": ["float32", "bfloat16"],
            "implementations": ["fused", *HF_IMPLEMENTATIONS],
            "timing": dict(TINY_TIMING),
            "scenarios": [
                {"name": "gqa", **base, "kv_heads": 2, "causal": True, "bias": True},
                {"name": "mha", **base, "causal": False},
                {"name": "train", **base, "kv_heads": 2, "causal": True, "mode": "train"},
            ],
        },
        "hf.yaml",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
        result = runner.run(config, Path(tmp_path_factory.mktemp("hf")))
    yield result.frame


def cpu_backward_of_flex(rows: pd.DataFrame) -> pd.Series:
    """The rows torch cannot run: FlexAttention has no backward on the CPU (torch 2.13)."""
    return (rows["impl"] == "hf_flex_attention") & (rows["mode"] == "train")


@needs_transformers
def test_cpu_choices_give_ok_rows_within_tolerance(hf_rows: pd.DataFrame) -> None:
    ran = hf_rows[hf_rows["impl"].isin(CPU_HF) & ~cpu_backward_of_flex(hf_rows)]
    assert len(ran) == len(CPU_HF) * 6 - 2
    assert (ran["status"] == "ok").all(), ran[["impl", "case_id", "error"]].to_string()
    for _, row in ran.iterrows():
        assert row["max_rel_err"] < TOLERANCE[row["dtype"]] and row["latency_ms"] > 0


@needs_transformers
def test_flex_training_on_the_cpu_is_unsupported_in_torchs_words(hf_rows: pd.DataFrame) -> None:
    rows = hf_rows[cpu_backward_of_flex(hf_rows)]
    assert len(rows) == 2 and (rows["status"] == "unsupported").all()
    assert rows["error"].str.contains("on cpu: FlexAttention does not support backward on CPU").all()


@needs_transformers
def test_flex_compile_is_timed_apart(hf_rows: pd.DataFrame) -> None:
    flex = hf_rows[(hf_rows["impl"] == "hf_flex_attention") & (hf_rows["status"] == "ok")]
    assert len(flex) == 4 and (flex["compile_time_s"] > 0).all()
    assert hf_rows.loc[hf_rows["impl"].isin(["hf_eager", "hf_sdpa"]), "compile_time_s"].isna().all()


@needs_transformers
def test_flash_choices_are_unsupported_rows_on_the_cpu(hf_rows: pd.DataFrame) -> None:
    flash = hf_rows[hf_rows["impl"].isin(FLASH_HF)]
    assert len(flash) == len(FLASH_HF) * 6 and (flash["status"] == "unsupported").all()
    for _, row in flash.iterrows():
        assert row["error"].startswith(f"{row['impl']}: ") and "\n" not in row["error"]
        assert math.isnan(row["latency_ms"])


GEMMA_TINY = {"d_model": 64, "heads": 4, "head_dim": 32, "kv_heads": 2, "mask": "sliding_window", "window": 8}


@pytest.fixture(scope="module")
def pattern_rows(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pd.DataFrame]:
    """float32 on the CPU: a window (GQA), a gemma-2-9b-shaped tiny case (head_dim apart, window, soft-cap
    20), and the patterns no transformers call runs."""
    base = {"batch": 1, "seq_len": 12, "d_model": 32, "heads": 4}
    config = parse_config(
        {
            "name": "hf-patterns",
            "device": "cpu",
            "threads": 1,
            "implementations": ["naive", *CPU_HF],
            "timing": dict(TINY_TIMING),
            "scenarios": [
                {"name": "window", **base, "kv_heads": 2, "mask": "sliding_window", "window": 5},
                {"name": "gemma", "batch": 1, "seq_len": 16, **GEMMA_TINY, "score_mod": "softcap", "softcap": 20},
                {"name": "prefix", **base, "mask": "prefix_lm", "prefix": 4},
                {"name": "alibi", **base, "mask": "causal", "score_mod": "alibi"},
                {"name": "documents", **base, "seq_len": 8, "mask": "document", "lengths": [5, 8]},
            ],
        },
        "hf-patterns.yaml",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
        result = runner.run(config, Path(tmp_path_factory.mktemp("hf-patterns")))
    yield result.frame


def rows_of(frame: pd.DataFrame, scenario: str) -> pd.DataFrame:
    return frame[frame["scenario"] == scenario].set_index("impl")


@needs_transformers
def test_window_rows_are_ok_for_every_cpu_choice(pattern_rows: pd.DataFrame) -> None:
    rows = rows_of(pattern_rows, "window")
    assert (rows["window"] == 5).all() and (rows["kv_heads"] == 2).all()
    assert (rows["status"] == "ok").all(), rows[["status", "error"]].to_string()
    assert (rows["max_rel_err"] < TOLERANCE["float32"]).all()


@needs_transformers
def test_a_gemma_2_shaped_case_is_ok_for_eager_and_flex_and_unsupported_for_sdpa(pattern_rows: pd.DataFrame) -> None:
    rows = rows_of(pattern_rows, "gemma")
    assert (rows["head_dim"] == 32).all() and (rows["softcap"] == 20).all() and (rows["window"] == 8).all()
    for name in ["naive", "hf_eager", "hf_flex_attention"]:
        assert rows.loc[name, "status"] == "ok", rows.loc[name, "error"]
        assert rows.loc[name, "max_rel_err"] < TOLERANCE["float32"]
    assert rows.loc["hf_sdpa", "status"] == "unsupported"
    assert rows.loc["hf_sdpa", "error"] == "hf_sdpa: no softcap score modifier"


@needs_transformers
@pytest.mark.parametrize(
    ("scenario", "reason"),
    [
        ("prefix", "no prefix_lm mask (masks: causal, none, sliding_window)"),
        ("alibi", "no alibi score modifier"),
        ("documents", "no document mask (masks: causal, none, sliding_window)"),
    ],
)
def test_patterns_transformers_cannot_run_are_unsupported_rows(
    pattern_rows: pd.DataFrame, scenario: str, reason: str
) -> None:
    rows = rows_of(pattern_rows, scenario)
    assert rows.loc["naive", "status"] == "ok"
    for name in CPU_HF:
        assert rows.loc[name, "status"] == "unsupported" and rows.loc[name, "error"] == f"{name}: {reason}"


@pytest.mark.parametrize(
    ("name", "skips"),
    [("hf_flex_attention", True), ("hf_flash_attention_2", True), ("hf_flash_attention_3", True), ("hf_eager", False)],
)
def test_block_skipping_kernels_are_read_at_useful_flops(name: str, skips: bool) -> None:
    assert kernel_skips_masked_work("", name) is skips


@needs_transformers
def test_the_manifest_records_which_transformers_ran() -> None:
    import transformers

    packages = environment(torch.device("cpu"))["peer_packages"]
    assert packages["transformers"] == transformers.__version__
    assert set(packages) == {"transformers", "flash-attn", "flash-attn-3", "xformers"}


@pytest.mark.cuda
@needs_transformers
@pytest.mark.parametrize("name", HF_IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "pattern",
    [
        AttentionPattern(mask="causal"),
        AttentionPattern(mask="sliding_window", window=16, score_mod="softcap", softcap=2.0),
    ],
    ids=["causal", "window+softcap"],
)
def test_on_cuda_in_bfloat16_each_choice_matches_the_reference_or_says_why_not(
    name: str, pattern: AttentionPattern
) -> None:
    shape = plain_case("t", 2, 64, 128, 4, kv_heads=2, pattern=pattern).workload()
    reason = get_spec(name).capabilities.unsupported_reason(name, shape, dtype="bfloat16", device_type="cuda")
    if reason is not None:
        pytest.skip(reason)
    weights = AttentionWeights.random(128, seed=5, dtype=torch.bfloat16, device="cuda", kv_dim=64)
    x = torch.randn(2, 64, 128, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        out = build(name, weights, 4, pattern)(x)
    reference = reference_attention(weights.to(torch.float64), x.double(), 4, pattern)
    assert numerical_error(out, reference)[1] < TOLERANCE["bfloat16"]


def test_the_shipped_config_asks_for_every_cpu_choice_beside_fused() -> None:
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "hf_attention.yaml")
    assert {"fused", *CPU_HF, "hf_flash_attention_2"} <= set(config.implementations)
    assert len(expand_cases(config, torch.device("cpu"))) == 3


def test_a_run_without_transformers_has_unsupported_rows_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # find_spec answers None, import raises
    monkeypatch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
    config = parse_config(
        {
            "name": "no-hf",
            "device": "cpu",
            "implementations": ["fused", *CPU_HF],
            "timing": dict(TINY_TIMING),
            "scenarios": [{"batch": 1, "seq_len": 8, "d_model": 16, "heads": 2, "causal": True}],
        },
        "no-hf.yaml",
    )
    rows = runner.run(config, tmp_path).frame.set_index("impl")
    assert rows.loc["fused", "status"] == "ok"
    for name in CPU_HF:
        assert rows.loc[name, "status"] == "unsupported"
        assert rows.loc[name, "error"] == f"{name}: transformers not installed (make hf installs it: the hf extra)"
