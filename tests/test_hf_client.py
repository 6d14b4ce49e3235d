"""The real client: transformers' own ``LlamaAttention`` on our weights computes what ``fused`` computes.

The ``hf_*`` rows call transformers' attention functions from our module; this test goes the other
way and runs the library's attention layer itself, built from a small ``LlamaConfig`` (no download),
with our ``AttentionWeights`` copied into its q/k/v/o projections. Rotary embeddings are neutralised
by handing the layer the position embeddings cos = 1, sin = 0: ``apply_rotary_pos_emb`` computes
``q·cos + rotate_half(q)·sin``, which is then q itself (likewise k). The mask is the one the model's
forward builds, from ``create_causal_mask`` for the configured implementation.

Windows and soft-caps go through the layers of the models that have them: ``MistralAttention``
(``sliding_window``) and ``Gemma2Attention`` (a window and ``attn_logit_softcapping``) with the mask
from ``create_sliding_window_causal_mask``, as their models' forwards build it.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any

import pytest
import torch

from mhabench import AttentionWeights, build
from mhabench.pattern import CAUSAL, AttentionPattern

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers not installed: pip install '.[hf]' (make test installs it)",
)
FP32 = {"rtol": 1e-5, "atol": 1e-5}


def llama_attention(weights: AttentionWeights, heads: int, attn_implementation: str) -> Any:
    """transformers' ``LlamaAttention`` holding ``weights``."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention

    head_dim = weights.w_q.shape[1] // heads
    config = LlamaConfig(
        hidden_size=weights.d_model,
        num_attention_heads=heads,
        num_key_value_heads=weights.kv_dim // head_dim,
        head_dim=head_dim,
        attention_bias=weights.has_bias,
        attn_implementation=attn_implementation,
    )
    return holding(LlamaAttention(config, layer_idx=0), weights)


def mistral_attention(weights: AttentionWeights, heads: int, window: int, attn_implementation: str) -> Any:
    """transformers' ``MistralAttention`` (no biases), ``sliding_window`` = ``window`` keys, holding ``weights``."""
    from transformers import MistralConfig
    from transformers.models.mistral.modeling_mistral import MistralAttention

    head_dim = weights.q_dim // heads
    config = MistralConfig(
        hidden_size=weights.d_model,
        num_attention_heads=heads,
        num_key_value_heads=weights.kv_dim // head_dim,
        head_dim=head_dim,
        sliding_window=window,
        attn_implementation=attn_implementation,
    )
    return holding(MistralAttention(config, layer_idx=0), weights)


def gemma2_attention(weights: AttentionWeights, heads: int, window: int, softcap: float | None) -> Any:
    """transformers' eager ``Gemma2Attention`` of a windowed layer with ``attn_logit_softcapping``, holding
    ``weights``; ``query_pre_attn_scalar`` = head_dim keeps the scale 1/√head_dim (as in gemma-2-9b)."""
    from transformers import Gemma2Config
    from transformers.models.gemma2.modeling_gemma2 import Gemma2Attention

    head_dim = weights.q_dim // heads
    config = Gemma2Config(
        hidden_size=weights.d_model,
        num_attention_heads=heads,
        num_key_value_heads=weights.kv_dim // head_dim,
        head_dim=head_dim,
        query_pre_attn_scalar=head_dim,
        sliding_window=window,
        attn_logit_softcapping=softcap,
        num_hidden_layers=1,
        layer_types=["sliding_attention"],
        attn_implementation="eager",
    )
    return holding(Gemma2Attention(config, layer_idx=0), weights)


def holding(layer: Any, weights: AttentionWeights) -> Any:
    """``layer`` in eval mode with ``weights`` in its projections (``nn.Linear`` stores the transpose of ``x @ w``)."""
    layer.eval()
    projections = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o"}
    with torch.no_grad():
        for proj, letter in projections.items():
            linear = getattr(layer, proj)
            linear.weight.copy_(getattr(weights, f"w_{letter}").t())
            if linear.bias is not None:
                linear.bias.copy_(getattr(weights, f"b_{letter}"))
    return layer


def causal_mask_for(layer: Any, x: torch.Tensor, utility: str = "create_causal_mask") -> Any:
    """The mask the model's forward passes its layers (``utility`` from ``masking_utils``), in this release's
    spelling of the call."""
    from transformers import masking_utils

    create = getattr(masking_utils, utility)
    parameters = inspect.signature(create).parameters
    kwargs: dict[str, Any] = {"config": layer.config, "attention_mask": None, "past_key_values": None}
    kwargs["inputs_embeds" if "inputs_embeds" in parameters else "input_embeds"] = x
    if "cache_position" in parameters:
        kwargs["cache_position"] = torch.arange(x.shape[1])
    return create(**kwargs)


def without_rotary(x: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Position embeddings under which rotary is the identity: cos = 1, sin = 0 at every position."""
    batch, seq_len, _ = x.shape
    return torch.ones(batch, seq_len, head_dim), torch.zeros(batch, seq_len, head_dim)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize(
    ("d_model", "heads", "kv_dim", "bias"),
    [(32, 4, 32, False), (48, 6, 16, True), (32, 4, 8, False)],
    ids=["mha", "gqa-bias", "mqa"],
)
def test_llama_attention_on_our_weights_equals_fused(
    attn_implementation: str, d_model: int, heads: int, kv_dim: int, bias: bool
) -> None:
    weights = AttentionWeights.random(d_model, bias=bias, seed=7, kv_dim=kv_dim)
    x = torch.randn(2, 13, d_model, generator=torch.Generator().manual_seed(8))
    layer = llama_attention(weights, heads, attn_implementation)
    with torch.no_grad():
        theirs, _ = layer(x, without_rotary(x, d_model // heads), causal_mask_for(layer, x))
        ours = build("fused", weights, heads, CAUSAL)(x)
    torch.testing.assert_close(theirs, ours, **FP32)


def test_the_comparison_can_fail() -> None:
    """With rotary left on (real positions), the layer no longer computes fused's function."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    weights = AttentionWeights.random(32, seed=7)
    x = torch.randn(1, 13, 32, generator=torch.Generator().manual_seed(8))
    layer = llama_attention(weights, 4, "sdpa")
    positions = torch.arange(13)[None]
    with torch.no_grad():
        rotary = LlamaRotaryEmbedding(layer.config)(x, positions)
        theirs, _ = layer(x, rotary, causal_mask_for(layer, x))
        ours = build("fused", weights, 4, CAUSAL)(x)
    assert not torch.allclose(theirs, ours, **FP32)


def test_llama_attention_equals_our_hf_rows() -> None:
    """Our ``hf_eager``/``hf_sdpa`` modules and the library's layer agree on the same weights (GQA, bias)."""
    weights = AttentionWeights.random(48, bias=True, seed=7, kv_dim=16)
    x = torch.randn(2, 13, 48, generator=torch.Generator().manual_seed(8))
    for attn_implementation in ["eager", "sdpa"]:
        layer = llama_attention(weights, 6, attn_implementation)
        with torch.no_grad():
            theirs, _ = layer(x, without_rotary(x, 8), causal_mask_for(layer, x))
            ours = build(f"hf_{attn_implementation}", weights, 6, CAUSAL)(x)
        torch.testing.assert_close(theirs, ours, **FP32)


WINDOW = 5


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_mistral_attention_with_a_window_equals_fused_and_our_hf_row(attn_implementation: str) -> None:
    """Mistral's ``sliding_window`` and our ``window`` count the same keys: the outputs agree with no translation."""
    weights = AttentionWeights.random(32, seed=7, kv_dim=16)
    x = torch.randn(2, 13, 32, generator=torch.Generator().manual_seed(8))
    pattern = AttentionPattern(mask="sliding_window", window=WINDOW)
    layer = mistral_attention(weights, 4, WINDOW, attn_implementation)
    mask = causal_mask_for(layer, x, "create_sliding_window_causal_mask")
    with torch.no_grad():
        theirs, _ = layer(x, without_rotary(x, 8), mask)
        ours = build("fused", weights, 4, pattern)(x)
        row = build(f"hf_{attn_implementation}", weights, 4, pattern)(x)
        causal = build("fused", weights, 4, CAUSAL)(x)
    torch.testing.assert_close(theirs, ours, **FP32)
    torch.testing.assert_close(theirs, row, **FP32)
    assert not torch.allclose(theirs, causal, **FP32)  # the window hides keys: it can fail


def test_gemma2_attention_with_a_window_and_softcap_equals_naive_and_our_hf_eager() -> None:
    """gemma-2-9b's shape in small (head_dim apart from d_model / heads, grouped K/V), cap 2 so that it bites."""
    weights = AttentionWeights.random(64, seed=7, kv_dim=64, q_dim=128)
    x = torch.randn(2, 13, 64, generator=torch.Generator().manual_seed(8))
    pattern = AttentionPattern(mask="sliding_window", window=WINDOW, score_mod="softcap", softcap=2.0)
    layer = gemma2_attention(weights, 4, WINDOW, 2.0)
    mask = causal_mask_for(layer, x, "create_sliding_window_causal_mask")
    with torch.no_grad():
        theirs, _ = layer(x, without_rotary(x, 32), mask)
        ours = build("naive", weights, 4, pattern)(x)
        row = build("hf_eager", weights, 4, pattern)(x)
        uncapped, _ = gemma2_attention(weights, 4, WINDOW, None)(x, without_rotary(x, 32), mask)
    torch.testing.assert_close(theirs, ours, **FP32)
    torch.testing.assert_close(theirs, row, **FP32)
    assert not torch.allclose(uncapped, ours, **FP32)  # without the cap it is another function: it can fail
