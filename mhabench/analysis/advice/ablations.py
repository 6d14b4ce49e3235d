"""Which implementations compute a different function (the ablations, checked against their own reference), and
which compute in a lower precision than their case (``fused_fp8``: e4m3 inside a bf16 layer).

An ablation (``shared_qk``, ``unscaled``, ``additive``, ``full_dim_heads``) passes its correctness
check against the function it means to compute, not against standard attention, so being faster is
no reason to switch to it: it changes the model. A lower-precision implementation computes the same
function with a larger error, checked under its compute dtype's tolerance: its speed is traded for that
error, so a pick quotes both. The registry knows which they are; an implementation it does not know (a
plugin not loaded here) is called neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mhabench.analysis.advice import wording
from mhabench.impls import get_spec
from mhabench.impls.registry import available_implementations
from mhabench.results.cells import number
from mhabench.results.columns import IMPL, MAX_REL_ERR


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


def lower_precision(impls: Iterable[str]) -> list[str]:
    """The names among ``impls`` registered with a compute dtype of their own (fp8 inside a bf16 case)."""
    known = set(available_implementations())
    return [impl for impl in impls if impl in known and get_spec(impl).compute_dtype is not None]


def precision_note(impls: Iterable[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """`` `fused_fp8` computes in float8_e4m3fn (max_rel_err 0.08; `fused` 0.004) …`` for the lower-precision
    implementations among ``impls``, with every ok row's error from ``rows``; "" when there are none."""
    found = lower_precision(impls)
    if not found:
        return ""
    errors = {str(row[IMPL]): number(row, MAX_REL_ERR) for row in rows}
    quoted = "; ".join(f"{wording.impl(impl)} {errors[impl]:.2g}" for impl in errors if errors[impl] is not None)
    dtypes = sorted({str(get_spec(impl).compute_dtype) for impl in found})
    verb = "computes" if len(found) == 1 else "compute"
    return (
        f" {wording.impls(found)} {verb} in {', '.join(dtypes)}, with a larger error"
        f"{f' (max_rel_err {quoted})' if quoted else ''}: its speed is traded for that error."
    )
