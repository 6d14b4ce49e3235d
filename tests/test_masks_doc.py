"""docs/masks.md's capability table is the registry's: a page cannot promise a mask that a run would then
report as ``unsupported``."""

from __future__ import annotations

import re
from pathlib import Path

from mhabench.views.implementations import patterns_markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "masks.md"


def test_masks_page_table_is_generated_from_the_registry() -> None:
    block = re.search(r"<!-- patterns:begin -->\n(.*?)\n<!-- patterns:end -->", PAGE.read_text(), re.S)
    assert block is not None, "docs/masks.md lost its generated table's markers"
    assert block.group(1) == patterns_markdown(), "regenerate: mhabench.views.implementations.patterns_markdown()"
