"""One weight set shared by every implementation, so their outputs can be compared bit for bit."""

from __future__ import annotations

import dataclasses
import math

import torch


@dataclasses.dataclass(frozen=True)
class AttentionWeights:
    """Projection weights of one attention layer, applied as ``x @ w`` (shape ``(in, out)``).

    ``w_q`` is ``(d_model, q_dim)`` and ``w_o`` ``(q_dim, d_model)`` where ``q_dim = heads * head_dim``:
    ``d_model`` stays the input and output width, and ``q_dim == d_model`` unless the scenario sets
    ``head_dim`` apart (Gemma 2, Qwen3). ``w_k`` and ``w_v`` are ``(d_model, kv_dim)`` where
    ``kv_dim = kv_heads * head_dim``; ``kv_dim == q_dim`` is ordinary multi-head attention, smaller
    values are grouped-query (GQA) or multi-query (MQA) attention. Biases are optional.
    """

    w_q: torch.Tensor
    w_k: torch.Tensor
    w_v: torch.Tensor
    w_o: torch.Tensor
    b_q: torch.Tensor | None = None
    b_k: torch.Tensor | None = None
    b_v: torch.Tensor | None = None
    b_o: torch.Tensor | None = None

    @property
    def d_model(self) -> int:
        return self.w_q.shape[0]

    @property
    def q_dim(self) -> int:
        """Width of all query heads together (heads · head_dim): what the attention output has before W_o."""
        return self.w_q.shape[1]

    @property
    def kv_dim(self) -> int:
        return self.w_k.shape[1]

    @property
    def has_bias(self) -> bool:
        return self.b_q is not None

    @classmethod
    def random(
        cls,
        d_model: int,
        bias: bool = False,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        kv_dim: int | None = None,
        q_dim: int | None = None,
    ) -> AttentionWeights:
        """Xavier-like weights (std 1/√d_model) so activations stay near unit scale at any size.

        Generated in float64 on the CPU from ``seed`` and then cast, so every dtype and device
        sees the same numbers up to rounding. ``q_dim`` and ``kv_dim`` default to ``d_model``; the
        draw order does not depend on them, so a default-width set is the one earlier versions drew.
        """
        q_dim = d_model if q_dim is None else q_dim
        kv_dim = q_dim if kv_dim is None else kv_dim
        generator = torch.Generator().manual_seed(seed)
        std = 1.0 / math.sqrt(d_model)

        def tensor(*shape: int) -> torch.Tensor:
            values = torch.randn(*shape, generator=generator, dtype=torch.float64) * std
            return values.to(dtype=dtype, device=device)

        in_dims = {"q": d_model, "k": d_model, "v": d_model, "o": q_dim}
        out_dims = {"q": q_dim, "k": kv_dim, "v": kv_dim, "o": d_model}
        matrices = {f"w_{k}": tensor(in_dims[k], dim) for k, dim in out_dims.items()}
        biases = {f"b_{k}": tensor(dim) if bias else None for k, dim in out_dims.items()}
        return cls(**matrices, **biases)

    def to(self, dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> AttentionWeights:
        """A copy with every tensor cast (used for the float64 reference)."""
        changes = {
            field.name: value.to(dtype=dtype, device=device)
            for field in dataclasses.fields(self)
            if (value := getattr(self, field.name)) is not None
        }
        return dataclasses.replace(self, **changes)

    def parameter_count(self) -> int:
        """Number of scalars in the weight set (matrices and biases)."""
        return sum(t.numel() for t in self.tensors())

    def tensors(self) -> list[torch.Tensor]:
        return [v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None]
