"""What a probe measures: one weight set per layer, and token inputs drawn again for every sample.

Random (the default): ``AttentionWeights.random`` (entries N(0, 1/D), seed = the scenario's) and
tokens with i.i.d. N(0, 1) entries, so q and k entries have variance ≈ 1 — the premise of the
1/√d_k argument. Every draw comes from one generator seeded with seed + 1, so the cases of a sweep
see the same tokens wherever their shapes agree.

Pretrained (``weights:``): each layer's packed (D, 3·D) Q/K/V and (D, D) output matrix from a
``.safetensors`` file, and as tokens the embeddings of uniformly drawn token ids plus the position
embeddings, normalised by that layer's LayerNorm when the file has it. Those are the inputs of
layer 0 exactly; for deeper layers they stand in for the residual stream, which a probe of one
attention block cannot compute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from mhabench.errors import ConfigError, InputError
from mhabench.impls.weights import AttentionWeights
from mhabench.probe.config import ProbeCase, WeightsFile

LAYER_NORM_EPS = 1e-5
"""GPT-2's LayerNorm epsilon."""

Draw = Callable[[torch.Generator], list[torch.Tensor]]
"""One input draw: a (batch, seq_len, d_model) float64 tensor per layer."""


@dataclasses.dataclass(frozen=True)
class ProbeSource:
    """The layers a case probes and how to draw its inputs."""

    layers: list[int]
    weights: list[AttentionWeights]
    """float64, one per layer."""
    draw: Draw


def random_source(case: ProbeCase) -> ProbeSource:
    """Seeded random weights (one layer) and N(0, 1) tokens."""
    kv_dim, q_dim = case.kv_heads * case.head_dim, case.heads * case.head_dim
    weights = AttentionWeights.random(case.d_model, case.bias, case.seed, torch.float64, kv_dim=kv_dim, q_dim=q_dim)

    def draw(generator: torch.Generator) -> list[torch.Tensor]:
        return [torch.randn(case.batch, case.seq_len, case.d_model, generator=generator, dtype=torch.float64)]

    return ProbeSource([0], [weights], draw)


@dataclasses.dataclass(frozen=True)
class PretrainedFile:
    """The tensors of one ``.safetensors`` file that a probe needs, in float64."""

    spec: WeightsFile
    tensors: dict[str, torch.Tensor]
    layers: list[int]

    def get(self, template: str | None, layer: int = 0) -> torch.Tensor | None:
        return None if template is None else self.tensors[template.format(layer=layer)]


def _keys(spec: WeightsFile, layer: int) -> list[tuple[str, str]]:
    """(field, key) pairs a layer needs; ``{layer}``-free keys are the same for every layer."""
    norm = [("norm", f"{spec.norm}.weight"), ("norm", f"{spec.norm}.bias")] if spec.norm else []
    optional = [(name, key) for name in ("qkv_bias", "out_bias") if (key := getattr(spec, name))]
    return [("qkv", spec.qkv), ("out", spec.out), *optional, *norm]


def _layers_in(spec: WeightsFile, names: set[str]) -> list[int]:
    """The requested layers, or every index ``qkv`` resolves to in the file (0, 1, … until one is missing)."""
    if spec.layers is not None:
        return spec.layers
    if "{layer}" not in spec.qkv:
        return [0]
    count = 0
    while spec.qkv.format(layer=count) in names:
        count += 1
    return list(range(count))


def load_pretrained(spec: WeightsFile) -> PretrainedFile:
    """Read only the tensors the probe needs; a missing key or file is one line naming the field."""
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError:
        raise InputError(
            "weights: reading .safetensors needs the optional extra: pip install 'mhabench[probe]'"
        ) from None
    if not spec.path.is_file():
        raise ConfigError(f"weights.path: no such file {spec.path}")
    try:
        with safe_open(str(spec.path), framework="pt") as handle:
            names = set(handle.keys())
            layers = _layers_in(spec, names)
            wanted = [("embeddings", spec.embeddings)] + ([("positions", spec.positions)] if spec.positions else [])
            wanted += [(field, key.format(layer=layer)) for layer in layers for field, key in _keys(spec, layer)]
            for field, key in wanted:
                if key not in names:
                    raise ConfigError(f"weights.{field}: no tensor {key!r} in {spec.path.name}")
            tensors = {key: handle.get_tensor(key).to(torch.float64) for _, key in wanted}
    except SafetensorError as exc:
        raise ConfigError(f"weights.path: {spec.path.name} is not a readable .safetensors file ({exc})") from None
    if not layers:
        raise ConfigError(f"weights.qkv: no tensor {spec.qkv.format(layer=0)!r} in {spec.path.name}")
    return PretrainedFile(spec, tensors, layers)


def _check_shapes(file: PretrainedFile, layer: int, d_model: int) -> None:
    """Every tensor of a layer in the ``x @ w`` layout at the scenario's d_model, or one line naming it."""
    spec, norm = file.spec, [(f"{file.spec.norm}.{part}", (d_model,)) for part in ("weight", "bias")]
    expected = [
        ("qkv", spec.qkv, (d_model, 3 * d_model)),
        ("out", spec.out, (d_model, d_model)),
        ("qkv_bias", spec.qkv_bias, (3 * d_model,)),
        ("out_bias", spec.out_bias, (d_model,)),
    ]
    expected += [("norm", key, shape) for key, shape in norm] if spec.norm else []
    for field, template, shape in expected:
        tensor = file.get(template, layer)
        if tensor is not None and tuple(tensor.shape) != shape:
            key = template.format(layer=layer) if template else ""
            raise ConfigError(f"weights.{field}: {key} is {tuple(tensor.shape)}; d_model {d_model} needs {shape}")


def _layer_weights(file: PretrainedFile, layer: int, d_model: int) -> AttentionWeights:
    """Split the packed (D, 3·D) matrix into W_Q, W_K, W_V (and its bias into b_Q, b_K, b_V)."""
    _check_shapes(file, layer, d_model)
    qkv, qkv_bias = file.tensors[file.spec.qkv.format(layer=layer)], file.get(file.spec.qkv_bias, layer)
    b_q, b_k, b_v = (None, None, None) if qkv_bias is None else qkv_bias.chunk(3)
    out = file.tensors[file.spec.out.format(layer=layer)]
    return AttentionWeights(*qkv.chunk(3, dim=1), out, b_q, b_k, b_v, file.get(file.spec.out_bias, layer))


def pretrained_source(case: ProbeCase, file: PretrainedFile) -> ProbeSource:
    """Every layer of the file, and embeddings of random token ids as inputs."""
    embeddings, positions = file.tensors[file.spec.embeddings], file.get(file.spec.positions)
    if embeddings.shape[-1] != case.d_model:
        raise ConfigError(f"d_model: {case.d_model} does not match the file's embedding width {embeddings.shape[-1]}")
    if positions is not None and case.seq_len > positions.shape[0]:
        raise ConfigError(
            f"seq_len: {case.seq_len} exceeds the {positions.shape[0]} positions in {file.spec.path.name}"
        )
    weights = [_layer_weights(file, layer, case.d_model) for layer in file.layers]

    def draw(generator: torch.Generator) -> list[torch.Tensor]:
        ids = torch.randint(embeddings.shape[0], (case.batch, case.seq_len), generator=generator)
        tokens = embeddings[ids] + (0 if positions is None else positions[: case.seq_len])
        return [_normalised(file, layer, tokens) for layer in file.layers]

    return ProbeSource(file.layers, weights, draw)


def _normalised(file: PretrainedFile, layer: int, tokens: torch.Tensor) -> torch.Tensor:
    if file.spec.norm is None:
        return tokens
    gain, shift = file.get(f"{file.spec.norm}.weight", layer), file.get(f"{file.spec.norm}.bias", layer)
    return F.layer_norm(tokens, tokens.shape[-1:], gain, shift, LAYER_NORM_EPS)


def source_for(case: ProbeCase, files: dict[Path, PretrainedFile]) -> ProbeSource:
    """The case's source; a weights file is read once per run and shared by the cases that name it."""
    if case.weights is None:
        return random_source(case)
    if case.weights.path not in files:
        files[case.weights.path] = load_pretrained(case.weights)
    return pretrained_source(case, files[case.weights.path])
