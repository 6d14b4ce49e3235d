"""``fused_fp8``: the ``fused`` layer computed in float8 (e4m3) on Hopper, bf16 at its edges.

A bf16 model that runs its attention layer in fp8: the input arrives in bf16 and the output leaves in
bf16, so the row sits in the same (bf16) case as ``fused`` and their speedup is paired. Inside:

1. x is quantized to e4m3 with its own per-tensor scale (:mod:`mhabench.impls.fp8`);
2. the packed QKV GEMM runs on the fp8 tensor cores (``torch._scaled_mm``, fp32 accumulation) into bf16;
3. the packed Q/K/V tensor is quantized with one per-tensor scale;
4. cuDNN's fp8 attention runs on views of it (:mod:`mhabench.impls.cudnn_fp8`, one graph per shape,
   built on the first call and cached) and writes O in e4m3 under V's scale;
5. the W_o GEMM runs in fp8 on O into bf16.

Weights are quantized once, when the layer is built. The registry declares the compute dtype
``float8_e4m3fn``: the check uses the tolerance derived for it and the row is placed on the fp8 roof.
What it cannot run (the CPU, a GPU below sm90, no frontend, a mask other than none or causal,
training, decode) is an ``unsupported`` row that says so.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import torch

from mhabench import cost
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.base import AttentionModule, frozen
from mhabench.impls.cudnn_fp8 import GraphCache, frontend_unsupported_reason
from mhabench.impls.fp8 import E4M3, Fp8Tensor, quantize, quantize_weight, scaled_linear
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern

COMPUTE_DTYPE = "float8_e4m3fn"
FRONTEND_MODULE = "cudnn"


def load_frontend() -> ModuleType | None:
    """NVIDIA's cuDNN Python frontend, or None when it is not installed (an ``unsupported`` row, not an error)."""
    try:
        return importlib.import_module(FRONTEND_MODULE)
    except ImportError:
        return None


FP8_ALIGNMENT = 16
"""Elements: ``torch._scaled_mm`` takes only GEMMs whose inner and output widths divide by 16, and cuDNN reads
each e4m3 head of the packed Q/K/V rows at 16-byte offsets."""


def misaligned_reason(d_model: int, head_dim: int) -> str | None:
    """Why a shape cannot run in fp8 here (None: it can): d_model (the GEMMs' widths) and head_dim (every head's
    offset in the packed rows, so q_dim and kv_dim too) must divide by :data:`FP8_ALIGNMENT`. Checked when the layer
    is built, so such a case is an ``unsupported`` row that names it, not a failed call."""
    if d_model % FP8_ALIGNMENT or head_dim % FP8_ALIGNMENT:
        return (
            f"needs d_model and head_dim divisible by {FP8_ALIGNMENT} (torch._scaled_mm's GEMM widths, cuDNN's "
            f"16-byte e4m3 heads); got d_model {d_model}, head_dim {head_dim}"
        )
    return None


@register(
    "fused_fp8",
    description="fused in fp8 (e4m3), bf16 at the edges: torch._scaled_mm projections, cuDNN's fp8 attention through "
    "nvidia-cudnn-frontend (sm90+)",
    cost=cost.FUSED_FP8,
    capabilities=Capabilities(
        decode=False, train=False, devices=frozenset({"cuda"}), dtypes=frozenset({"bfloat16"}), grouped_kv=True
    ),
    compute_dtype=COMPUTE_DTYPE,
)
class FusedFp8Attention(AttentionModule):
    """Packed QKV and W_o GEMMs in fp8, cuDNN's fp8 attention between them; bf16 in and out."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        device = weights.w_q.device
        frontend = load_frontend()
        reason = frontend_unsupported_reason(frontend, device)
        if reason is not None:
            raise UnsupportedError(f"fused_fp8: {reason}", reason.code)
        misaligned = misaligned_reason(weights.d_model, self.head_dim)
        if misaligned is not None:
            raise UnsupportedError(f"fused_fp8: {misaligned}", ReasonCode.HEAD_DIM)
        assert frontend is not None
        self.graphs = GraphCache(frontend, device)
        self.qkv_weight = quantize_weight(torch.cat([weights.w_q, weights.w_k, weights.w_v], dim=1))
        self.out_weight = quantize_weight(weights.w_o)
        # the e4m3 weights as the module's parameters: what its ``params`` column counts
        self.w_qkv, self.w_out = frozen(self.qkv_weight.data), frozen(self.out_weight.data)
        biases = (weights.b_q, weights.b_k, weights.b_v)
        self.b_qkv = frozen(None if weights.b_q is None else torch.cat(biases))  # type: ignore[arg-type]
        self.b_out = frozen(weights.b_o)
        self.split_sizes = [weights.q_dim, weights.kv_dim, weights.kv_dim]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq_len, _ = x.shape
        qkv = quantize(scaled_linear(quantize(x), self.qkv_weight, self.b_qkv, x.dtype))
        q, k, v = qkv.data.split(self.split_sizes, dim=-1)
        heads_out = torch.empty(batch, seq_len, self.heads * self.head_dim, dtype=E4M3, device=x.device)
        self.graphs.attend(
            self.split_heads(q, self.heads),
            self.split_heads(k, self.kv_heads),
            self.split_heads(v, self.kv_heads),
            qkv,
            self.split_heads(heads_out, self.heads),
            self.causal,
        )
        return scaled_linear(Fp8Tensor(heads_out, qkv.scale, qkv.descale), self.out_weight, self.b_out, x.dtype)
