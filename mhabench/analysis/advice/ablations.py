"""Which implementations compute a different function: the ablations, checked against their own reference.

An ablation (``shared_qk``, ``unscaled``, ``additive``, ``full_dim_heads``) passes its correctness
check against the function it means to compute, not against standard attention, so being faster is
no reason to switch to it: it changes the model. The registry knows which they are; an
implementation it does not know (a plugin not loaded here) is not called one.
"""

from __future__ import annotations

from collections.abc import Iterable

from mhabench.analysis.advice import wording
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations


def ablations(impls: Iterable[str]) -> list[str]:
    """The names among ``impls`` registered with a reference of their own."""
    known = set(available_implementations())
    return [impl for impl in impls if impl in known and get_spec(impl).reference is not None]


def ablation_note(impls: Iterable[str]) -> str:
    """`` `shared_qk` computes a different function …`` for the ablations among ``impls``, "" when none."""
    found = ablations(impls)
    if not found:
        return ""
    verb = "computes" if len(found) == 1 else "compute"
    return (
        f" {wording.impls(found)} {verb} a different function (an ablation, checked against its own float64 "
        "reference): faster is no reason to switch to it, it changes the model."
    )
