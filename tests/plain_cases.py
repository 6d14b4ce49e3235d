"""Cases for tests that need one case without a config: plain attention (none or causal over full-length rows)
unless a pattern is given."""

from __future__ import annotations

from typing import Any

from mhabench.pattern import CAUSAL, PLAIN, AttentionPattern
from mhabench.scenario.cases import Case


def plain_case(
    scenario: str,
    batch: int,
    seq_len: int,
    d_model: int,
    heads: int,
    causal: bool = False,
    bias: bool = False,
    dtype: str = "float32",
    seed: int = 0,
    *,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    pattern: AttentionPattern | None = None,
    **fields: Any,
) -> Case:
    """The case :func:`~mhabench.scenario.cases.expand_cases` makes of such a point: ``kv_heads`` = heads and
    ``head_dim`` = d_model / heads unless given, the pattern causal or none unless given."""
    return Case(
        scenario=scenario,
        batch=batch,
        seq_len=seq_len,
        d_model=d_model,
        heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads,
        head_dim=d_model // heads if head_dim is None else head_dim,
        bias=bias,
        dtype=dtype,
        seed=seed,
        pattern=pattern or (CAUSAL if causal else PLAIN),
        **fields,
    )
