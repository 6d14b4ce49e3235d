"""Models as scenarios: ``model: <preset>`` or ``model: path/to/config.json`` fills a scenario's shape.

The question users bring is "which attention for *my* model"; they should not have to translate a
model into d_model / heads / kv_heads / head_dim by hand. A model is read from a Hugging Face
``config.json`` with plain JSON (no hub access, no transformers import) or from a preset below, whose
every number was copied from that model's ``config.json`` on its hub page (the URL beside it).

What a model fills: ``d_model``, ``heads``, ``kv_heads``, ``bias``, ``head_dim`` only where the model
sets it apart from d_model / heads (Gemma 2; elsewhere it follows the case's own d_model / heads, so
overriding ``d_model`` keeps the model's proportions), the mask (a decoder is causal, or ``document``
when the scenario gives ``lengths``; ``sliding_window`` makes it ``mask: sliding_window`` with that
``window``) and a logit soft-cap (``score_mod: softcap``). A field the scenario gives itself wins and
may be swept. What
one attention layer of the model does beyond that is not modelled: rotary embeddings, Qwen3's
query/key norms, Qwen2's missing W_o bias (our ``bias`` covers all four projections), and which
layers of Gemma 2 use the window (every other one; the preset describes those).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mhabench.errors import quote, shorten
from mhabench.scenario.limits import MAX_HEAD_WIDTH, MAX_HEADS, MAX_MODEL_WIDTH, MAX_SEQ_LEN, MAX_SOFTCAP

HF_HUB = "https://huggingface.co"
PATH_LIMIT = 240
"""Longest file path an error quotes in full."""


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """The attention shape of one model, as its config.json gives it."""

    name: str
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    bias: bool
    max_position: int | None
    """Longest context the model was trained for (``max_position_embeddings``); None = its config does not say."""
    sliding_window: int | None = None
    """Keys each query sees on the windowed layers; None = full causal attention."""
    softcap: float | None = None
    """Attention-logit soft-cap (``attn_logit_softcapping``); None = no cap."""
    source: str = ""
    """Where the numbers come from: the config.json on the model's hub page, or the file read."""

    @property
    def head_dim_set_apart(self) -> bool:
        """The model's head width is not d_model / heads (Gemma 2: 16 × 256 ≠ 3584)."""
        return self.heads * self.head_dim != self.d_model

    def scenario_fields(self, documents: bool = False) -> dict[str, Any]:
        """The scenario fields this model fills (before a scenario's own fields override them).

        ``head_dim`` only where set apart: a head_dim that is d_model / heads must follow a case whose
        d_model or heads are overridden, or a 4096-wide query would run on a 1024-wide model. With
        ``documents`` (the scenario gives ``lengths``) causal attention is ``document``: causal within
        each document, which is what a decoder does to packed or padded documents.
        """
        fields: dict[str, Any] = {"d_model": self.d_model, "heads": self.heads, "kv_heads": self.kv_heads}
        head_dim = {"head_dim": self.head_dim} if self.head_dim_set_apart else {}
        if self.sliding_window:
            mask: dict[str, Any] = {"mask": "sliding_window", "window": self.sliding_window}
        else:
            mask = {"mask": "document" if documents else "causal"}
        score_mod = {"score_mod": "softcap", "softcap": self.softcap} if self.softcap else {}
        return fields | head_dim | {"bias": self.bias} | mask | score_mod


def _hub(repo: str) -> str:
    return f"{HF_HUB}/{repo}/blob/main/config.json"


PRESETS: dict[str, ModelShape] = {
    preset.name: preset
    for preset in (
        # n_embd 768, n_head 12, n_positions 1024; GPT-2's Conv1D projections all have biases
        ModelShape("gpt2", 768, 12, 12, 64, True, 1024, source=_hub("openai-community/gpt2")),
        # hidden_size 4096, num_attention_heads 32, num_key_value_heads 8 (head_dim 4096 / 32 = 128),
        # attention_bias false, max_position_embeddings 131072
        ModelShape("llama-3.1-8b", 4096, 32, 8, 128, False, 131072, source=_hub("meta-llama/Llama-3.1-8B")),
        # hidden_size 8192, num_attention_heads 64, num_key_value_heads 8 (head_dim 8192 / 64 = 128),
        # attention_bias false, max_position_embeddings 131072
        ModelShape("llama-3.1-70b", 8192, 64, 8, 128, False, 131072, source=_hub("meta-llama/Llama-3.1-70B")),
        # hidden_size 4096, num_attention_heads 32, num_key_value_heads 8 (head_dim 128), sliding_window 4096,
        # max_position_embeddings 32768
        ModelShape(
            "mistral-7b", 4096, 32, 8, 128, False, 32768, sliding_window=4096, source=_hub("mistralai/Mistral-7B-v0.1")
        ),
        # hidden_size 3584, num_attention_heads 28, num_key_value_heads 4 (head_dim 128), max_position_embeddings
        # 131072, use_sliding_window false; Qwen2 attention has q/k/v biases (o_proj has none)
        ModelShape("qwen2.5-7b", 3584, 28, 4, 128, True, 131072, source=_hub("Qwen/Qwen2.5-7B")),
        # hidden_size 3584, num_attention_heads 16, num_key_value_heads 8, head_dim 256 (16 × 256 = 4096 ≠ 3584),
        # sliding_window 4096 (every other layer), attn_logit_softcapping 50.0, query_pre_attn_scalar 256
        # (= head_dim, so the scale is 1/√head_dim as here), max_position_embeddings 8192
        ModelShape(
            "gemma-2-9b",
            3584,
            16,
            8,
            256,
            False,
            8192,
            sliding_window=4096,
            softcap=50.0,
            source=_hub("google/gemma-2-9b"),
        ),
        # hidden_size 4096, num_attention_heads 32, num_key_value_heads 8, head_dim 128, attention_bias false,
        # max_position_embeddings 40960, use_sliding_window false
        ModelShape("qwen3-8b", 4096, 32, 8, 128, False, 40960, source=_hub("Qwen/Qwen3-8B")),
    )
}
"""The shipped presets, by the name a scenario's ``model:`` gives."""

BIAS_BY_MODEL_TYPE = {"gpt2": True, "qwen2": True}
"""Architectures whose transformers code gives the projections biases without an ``attention_bias`` field."""


def is_path(model: str) -> bool:
    """A config.json path rather than a preset name."""
    return model.endswith(".json") or "/" in model or "\\" in model


def resolve(model: str, folder: Path) -> ModelShape:
    """The preset named ``model``, or the config.json at ``model`` (relative to ``folder``); ValueError: why not."""
    if is_path(model):
        return read_config_json(folder / model, name=model)
    if model not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown model preset {quote(model)}; known: {known} (or a path to a config.json)")
    return PRESETS[model]


def read_config_json(path: Path, name: str) -> ModelShape:
    """A Hugging Face ``config.json``'s attention shape; every problem is a ValueError naming the file and field."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{_where(path)}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{_where(path)}: cannot read the file ({shorten(str(exc))})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{_where(path)}: invalid JSON at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{_where(path)}: expected a JSON object of fields, got {type(data).__name__}")
    try:
        return _shape(data, name, path)
    except ValueError as exc:
        raise ValueError(f"{_where(path)}: {exc}") from None


def _where(path: Path) -> str:
    """The file as an error names it: whole unless absurdly long (a fuzzer's 5000-character path)."""
    return shorten(str(path), PATH_LIMIT)


def _shape(data: Mapping[str, Any], name: str, path: Path) -> ModelShape:
    """The shape, each size within the bounds a scenario's own field has, so a bad one names this file."""
    d_model = _count(data, "hidden_size", "n_embd", most=MAX_MODEL_WIDTH)
    heads = _count(data, "num_attention_heads", "n_head", most=MAX_HEADS)
    kv_heads = _count(data, "num_key_value_heads", default=heads, most=MAX_HEADS)
    if heads % kv_heads:
        raise ValueError(f"num_key_value_heads: {kv_heads} does not divide num_attention_heads {heads}")
    if "head_dim" in data and data["head_dim"] is not None:
        head_dim = _count(data, "head_dim", most=MAX_HEAD_WIDTH)
    elif d_model % heads:
        raise ValueError(f"num_attention_heads: {heads} does not divide hidden_size {d_model} (and no head_dim)")
    else:
        head_dim = d_model // heads
    scalar = data.get("query_pre_attn_scalar")
    if scalar is not None and scalar != head_dim:
        raise ValueError(f"query_pre_attn_scalar: {scalar} ≠ head_dim {head_dim}; mhabench scales by 1/√head_dim")
    return ModelShape(
        name=name,
        d_model=d_model,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        bias=_bias(data),
        max_position=_max_position(data),
        sliding_window=_window(data),
        softcap=_softcap(data),
        source=str(path),
    )


def _count(
    data: Mapping[str, Any], field: str, alias: str | None = None, default: int | None = None, most: int | None = None
) -> int:
    """A positive integer field (or its GPT-2 style alias), at most ``most`` (the scenario field's bound)."""
    key = field if field in data or alias is None or alias not in data else alias
    value = data.get(key, default)
    if value is None:
        named = field if alias is None else f"{field} (or {alias})"
        raise ValueError(f"{named}: missing")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key}: {quote(value)} is not a positive integer")
    if most is not None and value > most:
        raise ValueError(f"{key}: {quote(value)} is above {most}, the most a scenario takes")
    return value


def _max_position(data: Mapping[str, Any]) -> int | None:
    """Only ``mhabench models`` shows it, so a config.json without it is still a model."""
    if data.get("max_position_embeddings", data.get("n_positions")) is None:
        return None
    return _count(data, "max_position_embeddings", "n_positions")


def _bias(data: Mapping[str, Any]) -> bool:
    value = data.get("attention_bias", BIAS_BY_MODEL_TYPE.get(str(data.get("model_type")), False))
    if not isinstance(value, bool):
        raise ValueError(f"attention_bias: {quote(value)} is not true or false")
    return value


def _window(data: Mapping[str, Any]) -> int | None:
    """``sliding_window`` unless ``use_sliding_window`` is false (Qwen2 and Qwen3 list a window they do not use)."""
    if data.get("sliding_window") is None or data.get("use_sliding_window") is False:
        return None
    return _count(data, "sliding_window", most=MAX_SEQ_LEN)


def _softcap(data: Mapping[str, Any]) -> float | None:
    value = data.get("attn_logit_softcapping")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ValueError(f"attn_logit_softcapping: {quote(value)} is not a positive number")
    if value > MAX_SOFTCAP:
        raise ValueError(f"attn_logit_softcapping: {quote(value)} is above {MAX_SOFTCAP:g}, the most a scenario takes")
    return float(value)


FILLED_TOGETHER = {("mask", "window"): ("mask", "window", "causal"), ("score_mod", "softcap"): ("score_mod", "softcap")}
"""Fields a model fills as one (keys), and the scenario fields that, given, keep all of them out (values)."""


def with_model(scenario: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """``scenario`` with its ``model``'s fields filled in where it gives none of its own; ValueError: why not.

    The mask comes as a whole: a scenario that sets ``mask`` or ``causal`` itself gets neither the model's
    mask nor its window, and one that sets ``score_mod`` or ``softcap`` gets neither of the model's.
    """
    model = scenario["model"]
    if not isinstance(model, str) or not model:
        raise ValueError(f"expected a preset name or a path to a config.json, not {quote(model)}")
    filled = resolve(model, folder).scenario_fields(documents=scenario.get("lengths") is not None)
    own = {key for keys, given in FILLED_TOGETHER.items() if any(name in scenario for name in given) for key in keys}
    merged = {**{key: value for key, value in filled.items() if key not in own}, **scenario}
    _check_mixed_sizes(merged, scenario, model)
    return merged


DIVIDES = (("heads", "kv_heads", ""), ("d_model", "heads", " (or head_dim)"))
"""(whole, part, other way out): ``part`` must divide ``whole``; d_model / heads only without a head_dim."""


def _check_mixed_sizes(merged: Mapping[str, Any], scenario: Mapping[str, Any], model: str) -> None:
    """Refuse a size of the scenario that does not divide with one the model filled, naming the model.

    Sizes both from the model were checked as its config.json was read, and sizes both from the scenario are
    checked like any scenario's; a mix (``heads: 12`` beside Llama's 8 key/value heads) would otherwise be
    reported as if the user had written the model's number.
    """
    for whole, part, other in DIVIDES:
        if (whole in scenario) == (part in scenario) or (part == "heads" and merged.get("head_dim") is not None):
            continue
        from_model = part if whole in scenario else whole
        label = {field: f"{model}'s {field}" if field == from_model else field for field in (whole, part)}
        for whole_size, part_size in itertools.product(_sizes(merged.get(whole)), _sizes(merged.get(part))):
            if whole_size % part_size:
                problem = f"{label[whole]} {whole_size} is not divisible by {label[part]} {part_size}"
                raise ValueError(f"{problem}; set {from_model}{other} too")


def _sizes(value: Any) -> list[int]:
    """The positive integers of a size field (one or a sweep); anything else is left to the scenario's checks."""
    values = value if isinstance(value, list) else [value]
    return [size for size in values if isinstance(size, int) and not isinstance(size, bool) and size > 0]
