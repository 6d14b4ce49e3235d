"""``sdpa_nested``: documents as a nested jagged tensor through SDPA, torch's own variable-length route.

Instead of a dense block-diagonal mask (what ``fused`` gives SDPA for documents), the packed QKV GEMM's
output is cut into one sequence per segment (each document, and a padded row's padding) with
``torch.nested.nested_tensor_from_jagged``, so SDPA never sees a pair across documents: no mask tensor
and no masked work. Nested SDPA wants contiguous heads, so Q, K and V are copied out of the packed
output once per call (part of its time, and of its cost model). What torch's nested SDPA refuses is an
``unsupported`` row in torch's words: in torch 2.13, ``is_causal`` with nested queries (so causal
documents). Grouped K/V heads are declared unsupported (nested SDPA does not broadcast them).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import torch
import torch.nn.functional as F

from mhabench import cost
from mhabench.errors import ReasonCode, UnsupportedError
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, register
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import PLAIN, AttentionPattern
from mhabench.torch_errors import is_no_kernel


class Jagged(NamedTuple):
    """Where each segment starts in the flattened tokens, and the shortest and longest segment."""

    offsets: torch.Tensor
    min_len: int
    max_len: int


@register(
    "sdpa_nested",
    description="packed QKV GEMM, each document a nested jagged sequence into SDPA (varlen: no mask tensor), W_o",
    cost=cost.NESTED,
    capabilities=Capabilities(
        grouped_kv=False,
        masks=frozenset({"none", "causal", "document"}),
        layouts=frozenset({"padded", "packed"}),
    ),
)
class NestedSdpaAttention(FusedAttention):
    """:class:`FusedAttention`'s projections around SDPA on nested jagged documents."""

    def __init__(self, weights: AttentionWeights, heads: int, pattern: AttentionPattern = PLAIN) -> None:
        super().__init__(weights, heads, pattern)
        self.layouts: dict[tuple[object, ...], Jagged] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows, tokens, _ = x.shape
        layout = self.layout(rows, tokens, x.device)
        packed = F.linear(x, self.w_qkv, self.b_qkv).flatten(0, 1)
        widths = zip(packed.split(self.split_sizes, dim=-1), (self.heads, self.kv_heads, self.kv_heads), strict=True)
        q, k, v = (self.jagged(part, layout, heads) for part, heads in widths)
        try:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        except RuntimeError as exc:
            if not is_no_kernel(exc):
                raise
            what = "is_causal on nested queries" if self.causal else "these nested inputs"
            raise UnsupportedError(
                f"torch {torch.__version__} has no SDPA kernel for {what} on {x.device.type}", ReasonCode.SDPA_NO_KERNEL
            ) from None
        merged = out.transpose(1, 2).values().reshape(rows, tokens, -1)
        return F.linear(merged, self.w_out, self.b_out)

    def layout(self, rows: int, tokens: int, device: torch.device) -> Jagged:
        """The segments' offsets on the device and their shortest and longest length, built once per input
        shape (as a data loader prepares them with the batch): no host copy or device sync in the call."""
        key = (rows, tokens, device)
        if key not in self.layouts:
            segments = [length for row in self.pattern.rows(rows, tokens) for length in row]
            offsets = torch.tensor([0, *itertools.accumulate(segments)], device=device)
            self.layouts[key] = Jagged(offsets, min(segments), max(segments))
        return self.layouts[key]

    def prepare_masks(self, rows: int, q_len: int, kv_len: int, like: torch.Tensor) -> None:
        self.layout(rows, q_len, like.device)

    def jagged(self, part: torch.Tensor, layout: Jagged, heads: int) -> torch.Tensor:
        """(tokens, heads·d_k) → (documents, heads, j, d_k), nested: one contiguous copy of the heads."""
        values = part.contiguous().view(part.shape[0], heads, self.head_dim)
        nested = torch.nested.nested_tensor_from_jagged(
            values, layout.offsets, min_seqlen=layout.min_len, max_seqlen=layout.max_len
        )
        return nested.transpose(1, 2)
