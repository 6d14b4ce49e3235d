"""A preallocated key/value cache for the decode phase (one new token per sequence).

Decode time must be the time of one generation step, not of growing a tensor: the cache is
allocated once with room for the prefix plus the new token, so a step writes one slot in place and
attends over a view — no ``torch.cat`` of the whole cache per token.
"""

from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class KVCache:
    """Keys and values ``(batch, kv_heads, capacity, head_dim)``; positions ``[0, length)`` hold the prefix."""

    k: torch.Tensor
    v: torch.Tensor
    length: int

    @classmethod
    def prefill(cls, k: torch.Tensor, v: torch.Tensor, new_tokens: int = 1) -> KVCache:
        """A cache holding the prefix ``k``/``v`` (b, kv_heads, L, d_k) with room for ``new_tokens`` more."""
        batch, kv_heads, length, head_dim = k.shape
        shape = (batch, kv_heads, length + new_tokens, head_dim)
        cache = cls(k.new_empty(shape), v.new_empty(shape), length)
        cache.k[:, :, :length] = k
        cache.v[:, :, :length] = v
        return cache

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    def append(self, k_new: torch.Tensor, v_new: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens right after the prefix and return views of keys/values up to them.

        ``length`` does not advance: every call writes the same slots, so a benchmark can repeat
        the step and each repetition does exactly the same work against a cache of ``length``.
        """
        end = self.length + k_new.shape[2]
        self.k[:, :, self.length : end] = k_new
        self.v[:, :, self.length : end] = v_new
        return self.k[:, :, :end], self.v[:, :, :end]
