"""Bounds a scenario must stay within before anything runs: rows in a sweep, values in a YAML document.

One extra list value can mean days of runtime, and an alias-bomb document expands to 10⁹ values the
moment something walks it; both are refused with the number that would be needed to go on.
"""

from __future__ import annotations

from typing import Any

from mhabench.errors import ConfigError

MAX_DOCUMENT_VALUES = 100_000
"""A config document that expands (aliases copied out) to more values than this is refused."""

# Upper bounds of a scenario's sizes, shared by its fields and by a model's config.json (which fills them):
# a data-centre GPU could still need values up to these; beyond them a value is a typo, and every stored
# value then fits in int64 (so a Parquet column can never overflow).
MAX_SEQ_LEN = 1_048_576
"""Longest ``seq_len`` (and ``window``, ``prefix``)."""
MAX_MODEL_WIDTH = 65_536
"""Widest ``d_model``."""
MAX_HEADS = 1024
"""Most ``heads`` (and ``kv_heads``, ``tensor_parallel``)."""
MAX_HEAD_WIDTH = 16_384
"""Widest ``head_dim``."""
MAX_SOFTCAP = 1e6
"""Largest logit soft-cap (``softcap``)."""


def check_row_count(n_cases: int, n_impls: int, max_rows: int) -> None:
    """Refuse a sweep above ``max_rows`` rows before it starts: one extra list value can mean days of runtime."""
    rows = n_cases * n_impls
    if rows > max_rows:
        raise ConfigError(
            f"max_rows: the sweep expands to {n_cases:,} cases × {n_impls:,} implementations = {rows:,} rows, "
            f"above the limit of {max_rows:,}; to run it anyway pass --max-rows {rows} (or set max_rows: {rows})"
        )


def check_document_size(data: Any, source: str, limit: int = MAX_DOCUMENT_VALUES) -> None:
    """Refuse a parsed document that expands past ``limit`` values, or that contains itself.

    YAML aliases share one object, so a "billion laughs" document loads in microseconds but expands
    to 10⁹ values in validation and in error messages. This walk counts each shared object's expanded
    size once (memoised by identity), so it is linear in the objects actually loaded, and it is
    iterative, so deep nesting cannot overflow the stack.
    """
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()  # containers being counted: meeting one again means a cycle
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, children_counted = stack.pop()
        if not isinstance(node, (dict, list)) or id(node) in sizes:
            continue
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if children_counted:
            open_ids.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes.get(id(child), 1) for child in children)
            if sizes[id(node)] > limit:
                raise ConfigError(
                    f"{source}: the document expands to more than {limit:,} values (YAML aliases inside aliases?)"
                )
        elif id(node) in open_ids:
            raise ConfigError(f"{source}: a YAML alias refers to the value that contains it")
        else:
            open_ids.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children)
