"""``hf_*``: Hugging Face transformers' own attention functions, called the way a model's layer calls them.

Users pick attention in transformers with ``attn_implementation="eager" | "sdpa" | "flex_attention" |
"flash_attention_2" | "flash_attention_3"``; ``hf_<that value>`` runs that choice on ``fused``'s packed
QKV GEMM and W_o (the shared weights), so its row differs from ``fused`` only by what transformers
adds around the kernel. Every call builds the mask as ``LlamaModel.forward`` does once per forward,
with ``transformers.masking_utils`` for the configured implementation (a float additive mask for
eager, a ``BlockMask`` for flex, None where the kernel's own causal flag suffices), then does what
``LlamaAttention.forward`` does per layer: the heads in (b, h, n, d), the function itself with
``scaling`` = head_dim⁻⁰·⁵ and ``dropout`` 0 (its ``repeat_kv`` or ``enable_gqa`` for grouped K/V),
and its (b, n, h, d) output reshaped for W_o. Rotary embeddings, cache classes and padding masks are
left out (docs/peers.md).

transformers is optional (``pip install 'mhabench[hf]'``) and slow to import, so nothing here
imports it before a module is built; missing, or outside :data:`SUPPORTED_TRANSFORMERS`, every
``hf_*`` row is ``unsupported`` with the reason.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.errors import UnsupportedError
from mhabench.impls.compiled import compile_failure, unimplemented
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, optional_import, register
from mhabench.impls.weights import AttentionWeights

SUPPORTED_TRANSFORMERS = ((4, 57), (5, 19))
"""Versions whose attention API these peers were checked against: from 4.57 up to, not including, 5.19."""
FLASH_MAX_HEAD_DIM = 256  # FlashAttention-2 and -3 have no kernel for wider heads

MaskFactory = Callable[[Any, torch.Tensor], Any]


def release(version: str) -> tuple[int, int]:
    """(major, minor) of a version string such as ``5.18.0`` or ``4.57.6.dev0``; (0, 0) when it has none."""
    found = re.match(r"(\d+)\.(\d+)", version)
    return (int(found[1]), int(found[2])) if found else (0, 0)


def load_transformers() -> ModuleType:
    """``transformers.masking_utils``, once the installed release is one these peers support.

    Earlier releases lack the mask utilities; later ones may change the functions' arguments, which
    the float64 check would catch only as a failed row, so they are refused with the reason up front.
    """
    transformers = optional_import("transformers")
    low, high = SUPPORTED_TRANSFORMERS
    if not low <= release(transformers.__version__) < high:
        raise UnsupportedError(
            f"transformers {transformers.__version__} is outside the supported {low[0]}.{low[1]} to "
            f"{high[0]}.{high[1] - 1} (pip install 'mhabench[hf]')"
        )
    return optional_import("transformers.masking_utils")


def attention_function(attn_implementation: str) -> Callable[..., tuple[torch.Tensor, Any]]:
    """The function a model configured with ``attn_implementation`` calls in each attention layer.

    Eager lives in each model's file rather than in the shared registry; Llama's is the one most
    models copy, and the one ``LlamaAttention`` falls back to.
    """
    if attn_implementation == "eager":
        return optional_import("transformers.models.llama.modeling_llama").eager_attention_forward
    return optional_import("transformers.modeling_utils").ALL_ATTENTION_FUNCTIONS[attn_implementation]


def mask_factory(masking_utils: ModuleType, causal: bool) -> MaskFactory:
    """``(config, hidden_states) -> mask`` as the model's forward builds it, for this release's signature.

    Causal: ``create_causal_mask``. Bidirectional: ``create_bidirectional_mask`` (transformers 5);
    4.57 has none and its encoders pass no mask when nothing is padded, so neither do we.
    Releases name the input ``input_embeds`` (4.x) or ``inputs_embeds`` (5.x), and 4.x also wants
    the ``cache_position`` the model makes per call.
    """
    create = masking_utils.create_causal_mask if causal else getattr(masking_utils, "create_bidirectional_mask", None)
    if create is None:
        return lambda config, hidden_states: None
    parameters = inspect.signature(create).parameters
    embeds = "inputs_embeds" if "inputs_embeds" in parameters else "input_embeds"
    wants_positions = "cache_position" in parameters

    def create_mask(config: Any, hidden_states: torch.Tensor) -> Any:
        kwargs = {"config": config, embeds: hidden_states, "attention_mask": None, "past_key_values": None}
        if wants_positions:
            kwargs["cache_position"] = torch.arange(hidden_states.shape[1], device=hidden_states.device)
        return create(**kwargs)

    return create_mask


def model_config(weights: AttentionWeights, heads: int, kv_heads: int, head_dim: int, attn_implementation: str) -> Any:
    """The small ``LlamaConfig`` the mask utilities and attention functions read (no weights, no download)."""
    llama = optional_import("transformers.models.llama.configuration_llama")
    return llama.LlamaConfig(
        hidden_size=weights.d_model,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        attention_bias=weights.has_bias,
        attention_dropout=0.0,
        attn_implementation=attn_implementation,
    )


class HfAttention(FusedAttention):
    """``fused``'s projections around one transformers attention function, with the attributes it reads.

    The functions take the calling layer as ``module`` and read ``num_key_value_groups``,
    ``is_causal``, ``training``, ``config`` and ``layer_idx`` from it, so this module carries them
    as ``LlamaAttention`` does.
    """

    def __init__(
        self, weights: AttentionWeights, heads: int, causal: bool = False, *, attn_implementation: str
    ) -> None:
        super().__init__(weights, heads, causal)
        masking_utils = load_transformers()
        self.config = model_config(weights, heads, self.kv_heads, self.head_dim, attn_implementation)
        self.num_key_value_groups = heads // self.kv_heads
        self.is_causal = self.causal
        self.scaling = self.head_dim**-0.5
        self.layer_idx = 0
        self.attention_function = attention_function(attn_implementation)
        self.create_mask = mask_factory(masking_utils, self.causal)

    def attend_hf(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any) -> torch.Tensor:
        """The transformers function on (b, h, n, d) heads; returns (b, n, h, d)."""
        out, _ = self.attention_function(self, q, k, v, mask, dropout=0.0, scaling=self.scaling)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.create_mask(self.config, x)
        out = self.attend_hf(*self.project(x), mask)
        return F.linear(out.reshape(*x.shape[:-1], -1).contiguous(), self.w_out, self.b_out)


class HfFlexAttention(HfAttention):
    """``flex_attention``: transformers compiles FlexAttention itself, once per process, on the first call.

    Dynamo's caches are cleared when the module is built, so that first call (timed as
    ``compile_time_s``) compiles for this case's shapes, as ``flex`` does. What torch has not
    implemented (FlexAttention's backward on the CPU, as of 2.13) is an ``unsupported`` row in torch's words.
    """

    def __init__(
        self, weights: AttentionWeights, heads: int, causal: bool = False, *, attn_implementation: str
    ) -> None:
        import torch._dynamo  # deferred: importing Dynamo costs seconds

        if not torch._dynamo.is_dynamo_supported():
            raise UnsupportedError(f"torch.compile is not supported on this platform (torch {torch.__version__})")
        super().__init__(weights, heads, causal, attn_implementation=attn_implementation)
        torch._dynamo.reset()

    def attend_hf(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any) -> torch.Tensor:
        from torch._dynamo.exc import BackendCompilerFailed

        try:
            return super().attend_hf(q, k, v, mask)
        except BackendCompilerFailed as exc:
            raise compile_failure(exc, q.device) from None
        except NotImplementedError as exc:
            raise unimplemented(exc, q.device) from None


@dataclasses.dataclass(frozen=True)
class HfChoice:
    """One ``attn_implementation`` value and what it needs."""

    attn_implementation: str
    what: str
    cost: cost.CostModel
    capabilities: Capabilities
    module: type[HfAttention] = HfAttention
    compiles: bool = False


_FLASH_CAPABILITIES = {
    "devices": frozenset({"cuda"}),
    "dtypes": frozenset({"float16", "bfloat16"}),
    "max_head_dim": FLASH_MAX_HEAD_DIM,
}
HF_CHOICES = [
    HfChoice(
        "eager",
        "its float mask, repeat_kv, materialized softmax in fp32",
        cost.MATERIALIZED,
        Capabilities(requires=("transformers",)),
    ),
    HfChoice(
        "sdpa",
        "SDPA with is_causal (no mask tensor)",
        cost.FUSED,
        Capabilities(requires=("transformers",)),
    ),
    HfChoice(
        "flex_attention",
        "its BlockMask per call, compiled flex_attention",
        cost.FUSED,
        Capabilities(requires=("transformers",)),
        HfFlexAttention,
        compiles=True,
    ),
    HfChoice(
        "flash_attention_2",
        "flash_attn's FlashAttention-2",
        cost.FUSED,
        Capabilities(requires=("transformers", "flash_attn"), **_FLASH_CAPABILITIES),
    ),
    HfChoice(
        "flash_attention_3",
        "FlashAttention-3 (flash_attn_interface)",
        cost.FUSED,
        Capabilities(requires=("transformers", "flash_attn_interface"), **_FLASH_CAPABILITIES),
    ),
]
HF_IMPLEMENTATIONS = [f"hf_{choice.attn_implementation}" for choice in HF_CHOICES]

for _choice in HF_CHOICES:
    register(
        f"hf_{_choice.attn_implementation}",
        description=f'transformers attn_implementation="{_choice.attn_implementation}": packed QKV GEMM, '
        f"{_choice.what}, W_o",
        cost=_choice.cost,
        capabilities=_choice.capabilities,
        compiles=_choice.compiles,
    )(functools.partial(_choice.module, attn_implementation=_choice.attn_implementation))
