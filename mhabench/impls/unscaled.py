"""Ablation ``unscaled``: dot-product attention without the 1/√d_k factor (Vaswani et al. 2017, §3.2.1).

The argument: with unit-variance query and key entries Var(q·k) = d_k, so unscaled scores
grow like √d_k and the softmax saturates (one key takes almost all the probability, gradients
vanish) as heads get wider; dividing by √d_k restores variance 1. ``mhabench probe`` measures it.
Same FLOPs as ``naive``; the bytes model (``unscaled``) is the ``materialized`` one without the
elementwise scale pass over the scores.
"""

from __future__ import annotations

import torch

from mhabench import cost
from mhabench.impls.base import attention_probabilities, repeat_kv
from mhabench.impls.naive import NaiveAttention
from mhabench.impls.reference import reference_attention
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import AttentionPattern


def unscaled_reference(
    weights: AttentionWeights, x: torch.Tensor, heads: int, pattern: AttentionPattern
) -> torch.Tensor:
    """float64 reference: softmax(Q Kᵀ) V W_o, no 1/√d_k."""
    return reference_attention(weights, x, heads, pattern, scale=1.0)


@register(
    "unscaled",
    description="ablation: materialized softmax(QKᵀ)·V without the 1/√d_k scale (softmax saturation)",
    cost=cost.UNSCALED,
    capabilities=Capabilities(decode=False),  # no float64 decode reference of its own
    reference=unscaled_reference,
)
class UnscaledAttention(NaiveAttention):
    """``naive`` with the scale factor left out; grouped K/V heads are copied to their queries."""

    scaled = False

    def probabilities(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention probabilities (b, h, n, n) and the values (b, h, n, d_k) they weight."""
        groups = self.heads // self.kv_heads
        k, v = (repeat_kv(t, groups) for t in self.project_kv(x))
        return attention_probabilities(self.project_q(x), k, self.causal, scaled=False), v
