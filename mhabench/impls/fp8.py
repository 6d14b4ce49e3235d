"""float8 (e4m3) arithmetic for the fp8 layer: per-tensor scales, quantization, fp8 GEMMs and the tolerance.

Scales are per tensor and powers of two: the largest 2^k with amax · 2^k ≤ 448 (e4m3's largest
finite value). A power of two only moves the exponent, so scaling is exact and every error comes from
the one rounding to e4m3's 3 mantissa bits; amax · 2^k lands in (224, 448], so the largest elements
use the top binade and nothing saturates. ``descale`` (1 / scale) is what ``torch._scaled_mm`` and
cuDNN multiply back in.

Which scales are computed where (the choice docs/cost-model.md argues):

- weights: once, when the layer is built (they are constants; a deployed model quantizes them offline);
- activations (the input x and the packed Q/K/V): from their own amax inside every timed call, on the
  device, with no host synchronisation. Nothing is fitted to the input the check compares, and the
  timed call pays for the reductions a layer meeting unseen inputs would pay for;
- the softmax probabilities P ∈ [0, 1]: the fixed bound 1, so scale 448;
- the attention output O: a convex combination of the rows of V, so |O| ≤ amax(V) and O takes V's
  scale: no overflow is possible and no amax needs to be read back.

The tolerance the check uses is derived here from e4m3's unit roundoff and the roundings on the way
from the input to the output (:func:`derived_tolerance`, docs/cost-model.md "fp8 accuracy").
"""

from __future__ import annotations

import dataclasses
import math

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0
"""Largest finite e4m3fn value (the "fn" variant has no infinity; torch saturates a cast at ±448)."""
E4M3_MANTISSA_BITS = 3
E4M3_UNIT_ROUNDOFF = 2.0 ** -(E4M3_MANTISSA_BITS + 1)
"""u = 2⁻⁴: the largest relative error of rounding a normal number to nearest."""
PROBABILITY_SCALE = E4M3_MAX
"""Scale of the softmax probabilities (amax ≤ 1): 448, the bound the frontend documents for e4m3. The kernel
multiplies in fp32 before it rounds, so a scale that is not a power of two costs nothing, and 448 keeps
the 1/n-sized probabilities of long sequences (6·10⁻⁵ at n = 16k) out of e4m3's subnormals longer."""
MAX_SCALE_EXPONENT = 64
"""Cap on log2(scale), so an all-zero tensor gets a finite scale."""

FP8_ROUNDINGS = ("x", "W_qkv", "Q/K/V", "P", "O", "W_o")
"""The tensors rounded to e4m3 on the way from the layer's input to its output."""
TAIL_FACTOR = 2.0
"""Margin from the RMS error to the largest one the check reads (a heavier tail than a Gaussian's)."""


def derived_tolerance(unit_roundoff: float, roundings: int, tail_factor: float = TAIL_FACTOR) -> float:
    """Relative error (max |out − ref| / max |ref|) above which an fp8 output is wrong, not rounded.

    Each rounding perturbs its tensor by a relative error of at most u, uniform in [−u, u] at worst:
    an RMS of at most u/√3. A dot product of independent terms keeps that relative RMS (errors and
    values both add as random walks), so every rounding on the path adds at most u/√3 to the output's
    relative RMS error, independently: the output's is √(r/3)·u for r roundings. The check divides
    the largest error by the largest output, two maxima over the same elements, which scale alike;
    ``tail_factor`` covers a heavier tail than the output's.
    """
    return tail_factor * math.sqrt(roundings / 3) * unit_roundoff


FP8_TOLERANCE = derived_tolerance(E4M3_UNIT_ROUNDOFF, len(FP8_ROUNDINGS))
"""2 · √(6/3) · 2⁻⁴ ≈ 0.177 for the six roundings of :data:`FP8_ROUNDINGS`."""


def pow2_scale(amax: torch.Tensor) -> torch.Tensor:
    """The largest power of two s with amax · s ≤ 448, as a float32 tensor on amax's device (no sync)."""
    amax = amax.to(torch.float32).clamp_min(torch.finfo(torch.float32).tiny)
    exponent = torch.floor(torch.log2(E4M3_MAX / amax)).clamp(max=MAX_SCALE_EXPONENT)
    return torch.exp2(exponent)


def amax(t: torch.Tensor) -> torch.Tensor:
    """max |t| in float32, one reduction without an |t| temporary."""
    return torch.linalg.vector_norm(t, ord=math.inf, dtype=torch.float32)


@dataclasses.dataclass(frozen=True)
class Fp8Tensor:
    """e4m3 values and the per-tensor scale they were multiplied by: ``data · descale`` ≈ the original."""

    data: torch.Tensor
    scale: torch.Tensor
    descale: torch.Tensor

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The values it stands for (tests and fakes; the layer never dequantizes)."""
        return self.data.to(dtype) * self.descale.to(dtype)


def quantize(t: torch.Tensor, scale: torch.Tensor | None = None) -> Fp8Tensor:
    """``t`` in e4m3 under ``scale`` (default: :func:`pow2_scale` of its amax), scaled and cast in one kernel."""
    scale = pow2_scale(amax(t)) if scale is None else scale
    data = torch.empty(t.shape, dtype=E4M3, device=t.device)
    torch.mul(t, scale, out=data)
    return Fp8Tensor(data, scale, torch.reciprocal(scale))


def quantize_weight(w: torch.Tensor) -> Fp8Tensor:
    """A weight ``w`` (in, out), applied as ``x @ w``, in e4m3 and column-major: the layout
    ``torch._scaled_mm`` takes for its second operand."""
    packed = quantize(w.t().contiguous())
    return dataclasses.replace(packed, data=packed.data.t())


def scaled_linear(x: Fp8Tensor, w: Fp8Tensor, bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """``x @ w + bias`` on the fp8 tensor cores, accumulated in fp32, rescaled by both descales, in ``out_dtype``.

    ``x`` is (..., in) row-major, ``w`` (in, out) column-major (:func:`quantize_weight`). Full-precision
    accumulation (``use_fast_accum=False``): Hopper's fast mode keeps fewer accumulator bits, and the
    tolerance assumes none are lost.
    """
    rows = x.data.reshape(-1, x.data.shape[-1])
    out = torch._scaled_mm(
        rows, w.data, scale_a=x.descale, scale_b=w.descale, bias=bias, out_dtype=out_dtype, use_fast_accum=False
    )
    return out.view(*x.data.shape[:-1], w.data.shape[-1])
