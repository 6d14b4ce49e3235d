"""The real client: transformers' own ``LlamaAttention`` on our weights computes what ``fused`` computes.

The ``hf_*`` rows call transformers' attention functions from our module; this test goes the other
way and runs the library's attention layer itself, built from a small ``LlamaConfig`` (no download),
with our ``AttentionWeights`` copied into its q/k/v/o projections. Rotary embeddings are neutralised
by handing the layer the position embeddings cos = 1, sin = 0: ``apply_rotary_pos_emb`` computes
``q·cos + rotate_half(q)·sin``, which is then q itself (likewise k). The mask is the one the model's
forward builds, from ``create_causal_mask`` for the configured implementation.
"""

from __future__ import annotations

import importlib.util
import inspect
from typing import Any

import pytest
import torch

from mhabench import AttentionWeights, build

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers not installed: pip install '.[hf]' (make test installs it)",
)
FP32 = {"rtol": 1e-5, "atol": 1e-5}


def llama_attention(weights: AttentionWeights, heads: int, attn_implementation: str) -> Any:
    """transformers' ``LlamaAttention`` holding ``weights`` (``nn.Linear`` stores the transpose of ``x @ w``)."""
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
    layer = LlamaAttention(config, layer_idx=0).eval()
    projections = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o"}
    with torch.no_grad():
        for proj, letter in projections.items():
            linear = getattr(layer, proj)
            linear.weight.copy_(getattr(weights, f"w_{letter}").t())
            if linear.bias is not None:
                linear.bias.copy_(getattr(weights, f"b_{letter}"))
    return layer


def causal_mask_for(layer: Any, x: torch.Tensor) -> Any:
    """The mask ``LlamaModel.forward`` passes its layers, in this release's spelling of the call."""
    from transformers.masking_utils import create_causal_mask

    parameters = inspect.signature(create_causal_mask).parameters
    kwargs: dict[str, Any] = {"config": layer.config, "attention_mask": None, "past_key_values": None}
    kwargs["inputs_embeds" if "inputs_embeds" in parameters else "input_embeds"] = x
    if "cache_position" in parameters:
        kwargs["cache_position"] = torch.arange(x.shape[1])
    return create_causal_mask(**kwargs)


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
        ours = build("fused", weights, heads, causal=True)(x)
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
        ours = build("fused", weights, 4, causal=True)(x)
    assert not torch.allclose(theirs, ours, **FP32)


def test_llama_attention_equals_our_hf_rows() -> None:
    """Our ``hf_eager``/``hf_sdpa`` modules and the library's layer agree on the same weights (GQA, bias)."""
    weights = AttentionWeights.random(48, bias=True, seed=7, kv_dim=16)
    x = torch.randn(2, 13, 48, generator=torch.Generator().manual_seed(8))
    for attn_implementation in ["eager", "sdpa"]:
        layer = llama_attention(weights, 6, attn_implementation)
        with torch.no_grad():
            theirs, _ = layer(x, without_rotary(x, 8), causal_mask_for(layer, x))
            ours = build(f"hf_{attn_implementation}", weights, 6, causal=True)(x)
        torch.testing.assert_close(theirs, ours, **FP32)
