"""Probe inputs: seeded random weights and tokens, and pretrained weights from a tiny .safetensors file."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest
import torch

from mhabench.errors import ConfigError, InputError
from mhabench.probe.claims import INFO, NO_GUARANTEE, PASS
from mhabench.probe.config import ProbeCase, WeightsFile, parse_probe_config
from mhabench.probe.inputs import load_pretrained, pretrained_source, random_source
from mhabench.probe.run import run_config

D, LAYERS, VOCAB, POSITIONS = 16, 2, 50, 24


def _case(**changes: Any) -> ProbeCase:
    fields = {
        "scenario": "s",
        "batch": 2,
        "seq_len": 8,
        "d_model": D,
        "heads": 4,
        "kv_heads": 4,
        "bias": False,
        "seed": 0,
        "samples": 2,
        "claims": ("rank",),
    } | changes
    return ProbeCase(**fields)


def test_random_source_is_seeded_with_unit_variance_tokens() -> None:
    source = random_source(_case(seq_len=256, d_model=64, heads=4))
    first, again = (source.draw(torch.Generator().manual_seed(1))[0] for _ in range(2))
    assert torch.equal(first, again) and first.shape == (2, 256, 64) and first.dtype == torch.float64
    assert first.var().item() == pytest.approx(1.0, abs=0.05)
    assert source.weights[0].w_q.std().item() == pytest.approx(64**-0.5, rel=0.05)


def _gpt2_like(path: Path, tensors: dict[str, torch.Tensor] | None = None) -> Path:
    """GPT-2 small's key names and x @ w layout, at d_model 16 with two layers."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    generator = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.2

    data = {"wte.weight": randn(VOCAB, D), "wpe.weight": randn(POSITIONS, D)}
    for layer in range(LAYERS):
        data |= {
            f"h.{layer}.attn.c_attn.weight": randn(D, 3 * D),
            f"h.{layer}.attn.c_attn.bias": randn(3 * D),
            f"h.{layer}.attn.c_proj.weight": randn(D, D),
            f"h.{layer}.attn.c_proj.bias": randn(D),
            f"h.{layer}.ln_1.weight": torch.ones(D),
            f"h.{layer}.ln_1.bias": torch.zeros(D),
        }
    safetensors_torch.save_file(data | (tensors or {}), str(path))
    return path


def test_pretrained_layers_split_the_packed_matrix(tmp_path: Path) -> None:
    path = _gpt2_like(tmp_path / "tiny.safetensors")
    file = load_pretrained(WeightsFile(path=path))
    assert file.layers == [0, 1]
    source = pretrained_source(_case(weights=WeightsFile(path=path)), file)
    qkv = file.tensors["h.1.attn.c_attn.weight"]
    assert torch.equal(source.weights[1].w_k, qkv[:, D : 2 * D]) and source.weights[1].b_o is not None
    x0, x1 = source.draw(torch.Generator().manual_seed(0))
    assert x0.shape == (2, 8, D)
    assert x0.mean(dim=-1).abs().max().item() < 1e-12  # LayerNorm with gain 1 and shift 0
    assert torch.allclose(x0, x1)  # the same tokens, each layer's own (here identical) norm


@pytest.mark.parametrize(
    ("spec", "case", "message"),
    [
        ({"out": "h.{layer}.attn.proj"}, {}, "weights.out: no tensor 'h.0.attn.proj' in tiny.safetensors"),
        ({"layers": [0, 5]}, {}, "weights.qkv: no tensor 'h.5.attn.c_attn.weight'"),
        ({"path": "missing.safetensors"}, {}, "weights.path: no such file"),
        ({}, {"d_model": 32, "heads": 4}, "d_model: 32 does not match the file's embedding width 16"),
        ({}, {"seq_len": 30}, "seq_len: 30 exceeds the 24 positions in tiny.safetensors"),
    ],
)
def test_pretrained_errors_name_the_field(
    tmp_path: Path, spec: dict[str, Any], case: dict[str, Any], message: str
) -> None:
    path = _gpt2_like(tmp_path / "tiny.safetensors")
    weights = WeightsFile(**({"path": path} | spec))
    with pytest.raises(ConfigError) as error:
        pretrained_source(_case(weights=weights, **case), load_pretrained(weights))
    assert str(error.value).startswith(message)


def test_a_transposed_matrix_is_refused(tmp_path: Path) -> None:
    path = _gpt2_like(tmp_path / "tiny.safetensors", {"h.0.attn.c_attn.weight": torch.zeros(3 * D, D)})
    with pytest.raises(ConfigError, match=r"weights.qkv: h.0.attn.c_attn.weight is \(48, 16\); d_model 16 needs"):
        pretrained_source(_case(weights=WeightsFile(path=path)), load_pretrained(WeightsFile(path=path)))


def test_without_safetensors_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_import = builtins.__import__

    def no_safetensors(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("safetensors"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_safetensors)
    with pytest.raises(InputError, match=r"pip install 'mhabench\[probe\]'"):
        load_pretrained(WeightsFile(path=tmp_path / "w.safetensors"))


def test_pretrained_run_answers_what_random_weights_cannot(tmp_path: Path) -> None:
    path = _gpt2_like(tmp_path / "tiny.safetensors")
    scenario = {
        "name": "gpt",
        "seq_len": 8,
        "d_model": D,
        "heads": 4,
        "samples": 2,
        "weights": {"path": str(path)},
        "claims": ["var_qk", "rank", "equivalence", "trained"],
    }
    records = run_config(parse_probe_config({"scenarios": [scenario]}, "p.yaml"), tmp_path / "out").records
    verdicts = {r["claim"]: r["verdict"] for r in records if r["case"] != "—"}
    assert verdicts["var_qk"] == verdicts["rank_scores"] == NO_GUARANTEE  # learned weights: no random premise
    assert verdicts["same_output"] == verdicts["same_params"] == PASS
    assert verdicts["sparsity"] == verdicts["self_attention"] == verdicts["head_redundancy"] == INFO
    assert records[0]["case"] == "gpt/b1-n8-d16-h4-tiny"
    redundancy = next(r for r in records if r["claim"] == "head_redundancy")
    assert 0 < redundancy["measured"] < 10 and "heads range" in redundancy["note"]
