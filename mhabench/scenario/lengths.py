"""Document lengths of a batch: an explicit list, a seeded uniform draw, or a draw from a corpus file.

A scenario's ``lengths`` field holds one of these (or a list of them, which sweeps). Each resolves,
per ``seq_len`` of the sweep, to the tuple of document lengths a case runs; ``seq_len`` is the cap:
an explicit length above it is an error, a uniform draw never exceeds it, and a corpus document
longer than it is cut to it, as a tokenizer with ``max_length`` truncation would.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mhabench.errors import quote

MAX_DOCUMENTS = 65_536
Count = Annotated[int, Field(gt=0, le=MAX_DOCUMENTS, strict=True)]
Length = Annotated[int, Field(gt=0, le=1_048_576, strict=True)]


class UniformLengths(BaseModel):
    """``count`` lengths drawn uniformly from [min, max] with ``seed``; ``max`` defaults to the case's seq_len."""

    model_config = ConfigDict(extra="forbid")
    distribution: Literal["uniform"]
    min: Length
    max: Length | None = None
    count: Count
    seed: int = 0


class CorpusLengths(BaseModel):
    """``count`` lengths drawn (with replacement, ``seed``) from a file of one document length per line."""

    model_config = ConfigDict(extra="forbid")
    file: str
    count: Count
    seed: int = 0


ExplicitLengths = Annotated[list[Length], Field(min_length=1, max_length=MAX_DOCUMENTS)]
LengthsSpec = ExplicitLengths | UniformLengths | CorpusLengths


def as_sweep(value: Any) -> Any:
    """One spec is a one-value sweep: a list of ints is one explicit spec, a list of lists or mappings sweeps.

    Each spec is parsed here, so a bad one is one line about lengths (pydantic's union of three shapes
    would report a guess at which shape was meant)."""
    if value is None:
        return None
    if value == []:
        raise ValueError("an empty length list has no documents; give at least one length")
    if isinstance(value, list) and value and all(isinstance(item, list | dict) for item in value):
        return [parse_spec(item) for item in value]
    return [parse_spec(value)]


def parse_spec(value: Any) -> LengthsSpec:
    """One lengths spec: a list of positive ints, ``{distribution: uniform, …}`` or ``{file: …}``."""
    if isinstance(value, list):
        if not value:
            raise ValueError("an empty length list has no documents; give at least one length")
        if len(value) > MAX_DOCUMENTS:
            raise ValueError(f"{len(value)} documents; at most {MAX_DOCUMENTS}")
        bad = next((item for item in value if not _is_length(item)), None)
        if bad is not None:
            raise ValueError(f"document length {quote(bad)} is not an integer from 1 to 1048576")
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected a list of lengths or a mapping, got {quote(value)}")
    if "file" in value:
        return _validated(CorpusLengths, value)
    if value.get("distribution") != "uniform":
        raise ValueError("a lengths mapping is {distribution: uniform, min, count} or {file, count}")
    return _validated(UniformLengths, value)


def _is_length(item: Any) -> bool:
    return isinstance(item, int) and not isinstance(item, bool) and 0 < item <= 1_048_576


def _validated(model: type[BaseModel], value: dict[str, Any]) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "lengths"
        problem = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        raise ValueError(f"{where}: {problem}") from None


@functools.lru_cache(maxsize=16)
def read_corpus(path: str) -> tuple[int, ...]:
    """The positive integers of a lengths file (blank lines and ``#`` comments skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read the lengths file {path} ({exc.strerror or exc})") from None
    lengths = []
    for number, line in enumerate(text.splitlines(), 1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        if not entry.isdigit() or int(entry) == 0:
            raise ValueError(f"{path}: line {number} is not a positive length ({entry[:40]!r})")
        lengths.append(int(entry))
    if not lengths:
        raise ValueError(f"{path}: no lengths in the file")
    return tuple(lengths)


def resolve(spec: LengthsSpec, seq_len: int) -> tuple[int, ...]:
    """The document lengths of ``spec`` for a case whose cap is ``seq_len``."""
    if isinstance(spec, list):
        return tuple(spec)
    generator = torch.Generator().manual_seed(spec.seed)
    if isinstance(spec, UniformLengths):
        high = min(spec.max or seq_len, seq_len)
        drawn = torch.randint(min(spec.min, high), high + 1, (spec.count,), generator=generator)
        return tuple(int(v) for v in drawn)
    corpus = read_corpus(spec.file)
    picks = torch.randint(0, len(corpus), (spec.count,), generator=generator)
    return tuple(min(corpus[int(i)], seq_len) for i in picks)


def label(spec: LengthsSpec) -> str:
    """The ``lengths`` column and case-id token: short, file-name safe, distinct per spec.

    A long list and a corpus carry a digest of their lengths (the file's contents, not its path, so two
    machines with the file in different folders still compare), so two different sets never share a label.
    """
    if isinstance(spec, list):
        if len(spec) <= 6:
            return ".".join(map(str, spec))
        return f"{len(spec)}docs-{min(spec)}to{max(spec)}-{_digest(spec)}"
    if isinstance(spec, UniformLengths):
        top = f"{spec.max}" if spec.max else "n"
        return f"uniform{spec.min}to{top}x{spec.count}s{spec.seed}"
    return f"{Path(spec.file).stem}-{_digest(read_corpus(spec.file))}x{spec.count}s{spec.seed}"


def _digest(lengths: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, lengths)).encode()).hexdigest()[:8]


def too_long(spec: LengthsSpec, seq_len: int) -> str | None:
    """Why ``spec`` cannot run with cap ``seq_len`` (an explicit length, or a uniform minimum, above it)."""
    if isinstance(spec, list) and max(spec) > seq_len:
        return f"a document of {max(spec)} tokens is longer than seq_len {seq_len} (the cap)"
    if isinstance(spec, UniformLengths):
        if spec.min > seq_len:
            return f"min {spec.min} is longer than seq_len {seq_len} (the cap)"
        if spec.max is not None and spec.max < spec.min:
            return f"max {spec.max} is below min {spec.min}"
    return None
