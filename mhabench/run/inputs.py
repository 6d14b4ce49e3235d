"""What every implementation of one case is given: the weights, the input, and the float64 references.

Drawn once per case (and the weights reused while consecutive cases ask for the same set), so every
implementation of a case computes on the same numbers and is checked against the same reference.
"""

from __future__ import annotations

import dataclasses
import functools

import torch

from mhabench.impls.reference import Reference, expected_output
from mhabench.impls.registry import ImplSpec
from mhabench.impls.weights import AttentionWeights
from mhabench.run.steps import input_shape
from mhabench.scenario.cases import Case
from mhabench.scenario.config import DTYPES


@dataclasses.dataclass
class CaseInputs:
    """What every implementation of one case shares: weights, input, and the float64 references."""

    weights: AttentionWeights
    x: torch.Tensor
    references: dict[object, Reference] = dataclasses.field(default_factory=dict)

    def reference_for(self, spec: ImplSpec, case: Case) -> Reference:
        """The float64 output ``spec`` must reproduce (cached per reference function)."""
        key = spec.reference if case.phase == "prefill" else None
        if key not in self.references:
            self.references[key] = expected(spec, case, self.weights, self.x)
        return self.references[key]


def make_inputs(case: Case, device: torch.device) -> CaseInputs:
    """The case's weights (drawn on the host, so every device sees the same numbers) and its input.

    The input is drawn where it runs, in float32, from the case's seed: at b = 8, n = 16k,
    d_model = 4096 a float64 draw on the host would take 4.3 GB of RAM and seconds of one core.
    """
    dtype = DTYPES[case.dtype]
    kv_dim, q_dim = case.kv_heads * case.head_dim, case.heads * case.head_dim
    weights = case_weights(case.d_model, case.bias, case.seed, dtype, device, kv_dim, q_dim)
    generator = torch.Generator(device=device).manual_seed(case.seed + 1)
    shape = (*input_shape(case), case.d_model)
    x = torch.randn(shape, generator=generator, dtype=torch.float32, device=device)
    return CaseInputs(weights, x.to(dtype=dtype))


def expected(spec: ImplSpec, case: Case, weights: AttentionWeights, x: torch.Tensor) -> Reference:
    """The float64 output ``spec`` must reproduce: its own reference function, or standard attention
    computed on the case's device in blocks (a sampled set of rows for large cases)."""
    if spec.reference is not None and case.phase == "prefill":
        return Reference(spec.reference(weights, x, case.heads, case.pattern))
    return expected_output(weights, x, case.heads, case.pattern, phase=case.phase)


@functools.lru_cache(maxsize=1)
def case_weights(
    d_model: int, bias: bool, seed: int, dtype: torch.dtype, device: torch.device, kv_dim: int, q_dim: int
) -> AttentionWeights:
    """The weight set of the last case, reused while the next cases ask for the same one.

    A sweep's consecutive cases usually differ only in batch, length or mask, and a d_model = 4096
    set takes 1–2 s of one host core to draw in float64: longer than many cases' timed calls. No
    implementation may write to the weights (docs/plugins.md): modules copy or alias them, train
    steps take gradients with ``torch.autograd.grad``, so a reused set holds the numbers of a fresh draw.
    """
    return AttentionWeights.random(d_model, bias, seed, dtype, device, kv_dim=kv_dim, q_dim=q_dim)
