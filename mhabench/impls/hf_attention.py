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

Beyond causal, the patterns a transformers model has are called as that model calls them: a sliding
window as ``MistralAttention`` does (``create_sliding_window_causal_mask`` with ``config.sliding_window``
set, and ``sliding_window=`` passed to the function, which flash turns into its ``window_size``), a
soft-cap as ``Gemma2Attention`` does (``softcap=`` to the function, and Gemma 2's own eager function,
the one that applies it). Anything a transformers function cannot take (documents, prefix-LM, ALiBi,
and soft-cap under SDPA, whose function drops it) is refused before anything is built.

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
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.compiled import compile_failure, unimplemented
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, get_spec, optional_import, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern, describe

SUPPORTED_TRANSFORMERS = ((4, 57), (5, 19))
"""Versions whose attention API these peers were checked against: from 4.57 up to, not including, 5.19."""
FLASH_MAX_HEAD_DIM = 256  # FlashAttention-2 and -3 have no kernel for wider heads

HF_MASKS = frozenset({"none", "causal", "sliding_window"})
"""Masks transformers' mask utilities build from a config alone (no padding mask, no packed positions)."""
SOFTCAP_SCORE_MODS = frozenset({"none", "softcap"})
"""What a function that takes ``softcap=`` runs; SDPA's function accepts the keyword and ignores it."""

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
            f"{high[0]}.{high[1] - 1} (pip install 'mhabench[hf]')",
            ReasonCode.VERSION,
        )
    return optional_import("transformers.masking_utils")


def model_family(pattern: AttentionPattern) -> str:
    """The transformers model whose attention layer runs ``pattern``, and whose calls these peers copy.

    Gemma 2 for a soft-cap (with or without its window), Mistral for a window alone, Llama otherwise.
    """
    if pattern.score_mod == "softcap":
        return "gemma2"
    return "mistral" if pattern.mask == "sliding_window" else "llama"


def attention_function(attn_implementation: str, family: str = "llama") -> Callable[..., tuple[torch.Tensor, Any]]:
    """The function a ``family`` model configured with ``attn_implementation`` calls in each attention layer.

    Eager lives in each model's file rather than in the shared registry: Llama's (which most models
    copy) and Mistral's ignore ``softcap``, Gemma 2's applies it, so the family's own one is taken.
    """
    if attn_implementation == "eager":
        return optional_import(f"transformers.models.{family}.modeling_{family}").eager_attention_forward
    return optional_import("transformers.modeling_utils").ALL_ATTENTION_FUNCTIONS[attn_implementation]


def pattern_kwargs(pattern: AttentionPattern) -> dict[str, Any]:
    """The keywords Mistral's and Gemma 2's layers pass the function beyond Llama's: ``sliding_window``
    (keys each query sees, itself included: the same count as our ``window``) and ``softcap``."""
    kwargs: dict[str, Any] = {}
    if pattern.mask == "sliding_window":
        kwargs["sliding_window"] = pattern.window
    if pattern.score_mod == "softcap":
        kwargs["softcap"] = pattern.softcap
    return kwargs


def refuse_unsupported(pattern: AttentionPattern, attn_implementation: str) -> None:
    """Refuse what the choice's capabilities do not declare (the runner screens it first; ``build`` gets it here).

    A function handed a keyword it does not use would silently compute another attention, so such a
    pattern never reaches one.
    """
    capabilities = get_spec(f"hf_{attn_implementation}").capabilities
    documents = pattern.lengths is not None and pattern.layout not in capabilities.layouts
    if documents or pattern.mask not in capabilities.masks or pattern.score_mod not in capabilities.score_mods:
        raise UnsupportedError(
            f"hf_{attn_implementation}: transformers' {attn_implementation} call cannot run {describe(pattern)}"
            f"{' over documents' if pattern.lengths is not None else ''}",
            ReasonCode.PATTERN,
        )


def mask_factory(masking_utils: ModuleType, mask: str) -> MaskFactory:
    """``(config, hidden_states) -> mask`` as the model's forward builds it, for this release's signature.

    Causal: ``create_causal_mask``. Sliding window: ``create_sliding_window_causal_mask`` (Mistral's
    and Gemma 2's windowed layers; it reads ``config.sliding_window``). Bidirectional:
    ``create_bidirectional_mask`` (transformers 5); 4.57 has none and its encoders pass no mask when
    nothing is padded, so neither do we. Releases name the input ``input_embeds`` (4.x) or
    ``inputs_embeds`` (5.x), and 4.x also wants the ``cache_position`` the model makes per call.
    """
    creators = {
        "causal": masking_utils.create_causal_mask,
        "sliding_window": masking_utils.create_sliding_window_causal_mask,
        "none": getattr(masking_utils, "create_bidirectional_mask", None),
    }
    create = creators[mask]
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


def model_config(
    weights: AttentionWeights,
    heads: int,
    kv_heads: int,
    head_dim: int,
    attn_implementation: str,
    sliding_window: int | None = None,
) -> Any:
    """The small ``LlamaConfig`` the mask utilities and attention functions read (no weights, no download).

    A window is set as ``config.sliding_window``, the field Mistral's and Gemma 2's configs carry and the
    one ``create_sliding_window_causal_mask`` reads; the mask utilities read nothing else of the model.
    """
    llama = optional_import("transformers.models.llama.configuration_llama")
    config = llama.LlamaConfig(
        hidden_size=weights.d_model,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        attention_bias=weights.has_bias,
        attention_dropout=0.0,
        attn_implementation=attn_implementation,
    )
    if sliding_window is not None:
        config.sliding_window = sliding_window
    return config


class HfAttention(FusedAttention):
    """``fused``'s projections around one transformers attention function, with the attributes it reads.

    The functions take the calling layer as ``module`` and read ``num_key_value_groups``,
    ``is_causal``, ``training``, ``config`` and ``layer_idx`` from it, so this module carries them
    as ``LlamaAttention`` does.
    """

    def __init__(
        self,
        weights: AttentionWeights,
        heads: int,
        pattern: AttentionPattern = PLAIN,
        *,
        attn_implementation: str,
    ) -> None:
        super().__init__(weights, heads, pattern)
        refuse_unsupported(self.pattern, attn_implementation)
        masking_utils = load_transformers()
        window = self.pattern.window if self.pattern.mask == "sliding_window" else None
        self.config = model_config(weights, heads, self.kv_heads, self.head_dim, attn_implementation, window)
        self.num_key_value_groups = heads // self.kv_heads
        self.is_causal = self.causal
        self.scaling = self.head_dim**-0.5
        self.layer_idx = 0
        self.attention_function = attention_function(attn_implementation, model_family(self.pattern))
        self.create_mask = mask_factory(masking_utils, self.pattern.mask)
        self.pattern_kwargs = pattern_kwargs(self.pattern)

    def prepare_masks(self, rows: int, q_len: int, kv_len: int, like: torch.Tensor) -> None:
        """Nothing ahead of the calls: transformers builds its own mask, once per call here (see the module doc)."""

    def attend_hf(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any) -> torch.Tensor:
        """The transformers function on (b, h, n, d) heads, with the pattern's keywords; returns (b, n, h, d)."""
        out, _ = self.attention_function(self, q, k, v, mask, dropout=0.0, scaling=self.scaling, **self.pattern_kwargs)
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
        self,
        weights: AttentionWeights,
        heads: int,
        pattern: AttentionPattern = PLAIN,
        *,
        attn_implementation: str,
    ) -> None:
        import torch._dynamo  # deferred: importing Dynamo costs seconds

        if not torch._dynamo.is_dynamo_supported():
            raise UnsupportedError(
                f"torch.compile is not supported on this platform (torch {torch.__version__})", ReasonCode.PLATFORM
            )
        super().__init__(weights, heads, pattern, attn_implementation=attn_implementation)
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


_WINDOW_AND_SOFTCAP = {"masks": HF_MASKS, "score_mods": SOFTCAP_SCORE_MODS}
_FLASH_CAPABILITIES = {
    "devices": frozenset({"cuda"}),
    "dtypes": frozenset({"float16", "bfloat16"}),
    "max_head_dim": FLASH_MAX_HEAD_DIM,
    **_WINDOW_AND_SOFTCAP,
}
HF_CHOICES = [
    HfChoice(
        "eager",
        "its float mask, repeat_kv, materialized softmax in fp32",
        cost.MATERIALIZED,
        Capabilities(requires=("transformers",), **_WINDOW_AND_SOFTCAP),
    ),
    HfChoice(
        "sdpa",
        "SDPA with is_causal, its boolean mask for a window",
        cost.FUSED,
        Capabilities(requires=("transformers",), masks=HF_MASKS),
    ),
    HfChoice(
        "flex_attention",
        "its BlockMask per call, compiled flex_attention",
        cost.FUSED,
        Capabilities(requires=("transformers",), **_WINDOW_AND_SOFTCAP),
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
