"""A findings page's timed claims, each a small YAML block beside its sentence.

A claim block is an HTML comment (invisible in the rendered page) followed by the sentence it stands
for and a closing comment::

    <!-- claim
    id: decode-gqa-b256
    config: configs/decode_batch_sweep.yaml
    case: {kv_heads: 2, batch: 256}
    kind: ratio
    impls: [fused, naive]
    figure: [2.0, 3.0]
    -->
    …the sentence, generated from the block and the page's check report…
    <!-- /claim -->

The block is hand-written (what is claimed); the sentence between the comments is not: it is
rendered from the block and the stored check report (:mod:`mhabench.findings.prose`), so a page
cannot say more than its block and its runs.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Annotated, Any, Literal, NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mhabench.errors import InputError


class Kind(str, enum.Enum):
    """What a claim says about one case of a run.

    - ``winner``: ``impls[0]`` wins the case (every other row clearly slower).
    - ``tie``: no row of ``impls`` is clearly faster than another.
    - ``ratio``: ``impls[0]`` is ``figure[0]``–``figure[1]`` times as fast as ``impls[1]``.
    - ``ordering``: ``impls`` from fastest to slowest, each clearly faster than the next.
    - ``slowest``: every other row that ran is clearly faster than ``impls[0]``.
    - ``every_process``: ``impls[0]`` over ``impls[1]`` lies within ``figure`` in every process of the run
      (``figure[1]`` null: no upper bound).
    """

    WINNER = "winner"
    TIE = "tie"
    RATIO = "ratio"
    ORDERING = "ordering"
    SLOWEST = "slowest"
    EVERY_PROCESS = "every_process"

    __str__ = str.__str__


class Setting(NamedTuple):
    """A claim's runs: which config, how many processes, and the threads and allocator (None: not fixed)."""

    config: str
    replicates: int
    threads: int | None
    allocator: str | None


IMPL_COUNT = {
    Kind.WINNER: (1, 1),
    Kind.SLOWEST: (1, 1),
    Kind.TIE: (2, 99),
    Kind.ORDERING: (2, 99),
    Kind.RATIO: (2, 2),
    Kind.EVERY_PROCESS: (2, 2),
}
"""The fewest and most implementations each kind names."""

NEEDS_FIGURE = frozenset({Kind.RATIO, Kind.EVERY_PROCESS})


class Claim(BaseModel):
    """One timed claim: which config and case, which implementations, what is said of them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    config: str
    """The scenario file the claim's runs come from (``default`` for the embedded default)."""
    case: dict[str, int | float | str | bool]
    """Fields the case must have (``{kv_heads: 2, batch: 256}``); exactly one case of the run matches."""
    kind: Kind
    impls: list[str]
    figure: tuple[float, float | None] | None = None
    """``ratio``: the stated range; ``every_process``: the bounds every process's ratio lies in."""
    replicates: Annotated[int, Field(ge=2)] = 3
    threads: Annotated[int, Field(ge=1)] | None = None
    """The torch threads the claim's runs use (``--threads``); None: any, the runs' own."""
    allocator: Literal["steady", "system"] | None = None
    """The CPU allocator policy of the claim's runs (``--allocator``); None: any, the runs' own."""

    @property
    def setting(self) -> Setting:
        """How the claim's runs are launched: config, replicates, threads and allocator."""
        return Setting(self.config, self.replicates, self.threads, self.allocator)

    @model_validator(mode="after")
    def _fits_kind(self) -> Claim:
        fewest, most = IMPL_COUNT[self.kind]
        if not fewest <= len(self.impls) <= most:
            raise ValueError(f"kind {self.kind} names {fewest}–{most} implementations, not {len(self.impls)}")
        if self.kind in NEEDS_FIGURE and self.figure is None:
            raise ValueError(f"kind {self.kind} needs a figure: [low, high]")
        if self.kind not in NEEDS_FIGURE and self.figure is not None:
            raise ValueError(f"kind {self.kind} takes no figure")
        if self.figure is not None:
            low, high = self.figure
            if self.kind == Kind.RATIO and high is None:
                raise ValueError("a ratio's figure needs both ends")
            if low <= 0 or (high is not None and high < low):
                raise ValueError(f"figure {list(self.figure)} is not a range of ratios")
        return self


BLOCK = re.compile(r"<!-- claim\n(?P<spec>.*?)-->\n(?P<text>.*?)<!-- /claim -->", re.DOTALL)
"""A claim block: its YAML between ``<!-- claim`` and ``-->``, then its sentence up to ``<!-- /claim -->``."""

OPENING = "<!-- claim\n"


@dataclasses.dataclass(frozen=True)
class Block:
    """A claim as found on a page: the claim, the sentence the page holds for it, and where it is."""

    claim: Claim
    text: str
    start: int
    end: int
    text_start: int


def parse_page(page_text: str, where: str = "page") -> list[Block]:
    """Every claim block of a page, in page order; a malformed block or a repeated id is an InputError."""
    blocks = [_block(found, where) for found in BLOCK.finditer(page_text)]
    if page_text.count(OPENING) != len(blocks):
        raise InputError(f"{where}: a '<!-- claim' block has no '<!-- /claim -->' after it")
    seen: set[str] = set()
    for block in blocks:
        if block.claim.id in seen:
            raise InputError(f"{where}: claim id {block.claim.id!r} is used twice")
        seen.add(block.claim.id)
    return blocks


def _block(found: re.Match[str], where: str) -> Block:
    try:
        spec: Any = yaml.safe_load(found.group("spec"))
        claim = Claim.model_validate(spec)
    except (yaml.YAMLError, ValidationError) as error:
        first = str(error).splitlines()
        raise InputError(f"{where}: claim block at offset {found.start()}: {' '.join(first[:3])}") from None
    return Block(claim, found.group("text"), found.start(), found.end(), found.start("text"))


def replace_texts(page_text: str, texts: dict[str, str]) -> str:
    """The page with each claim's sentence replaced by ``texts[claim id]`` (claims not named are kept)."""

    def one(found: re.Match[str]) -> str:
        claim_id = Claim.model_validate(yaml.safe_load(found.group("spec"))).id
        text = texts.get(claim_id, found.group("text"))
        return f"<!-- claim\n{found.group('spec')}-->\n{text}<!-- /claim -->"

    return BLOCK.sub(one, page_text)
