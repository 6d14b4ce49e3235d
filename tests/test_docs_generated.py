"""``make docs``: adding an implementation is one file plus one command that brings every generated doc along."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from mhabench.checks import docs

ROOT = Path(__file__).resolve().parents[1]
THROWAWAY = '''"""Throwaway attention for the docs test: `fused`'s layer under another name."""

from mhabench import cost
from mhabench.impls.fused import FusedAttention
from mhabench.impls.registry import Capabilities, register

register(
    "throwaway_attention",
    description="a test's throwaway implementation",
    cost=cost.FUSED,
    capabilities=Capabilities(masks=frozenset({"none", "causal", "sliding_window"})),
)(FusedAttention)
'''


def test_the_generated_docs_are_up_to_date() -> None:
    """Every generated part of this checkout equals what the generator writes (run `make docs` if not)."""
    assert docs.regenerate(ROOT, check=True) == []


@pytest.mark.usefixtures("registry_snapshot")
def test_one_implementation_file_plus_make_docs_is_all_it_takes(tmp_path: Path) -> None:
    """A copy of the checkout's docs and package, one new file in impls/, then the generator: the README table, the
    masks table and the module map name it, and a second run finds nothing left to do."""
    for name in ("README.md", "docs/masks.md", "docs/columns.md", "docs/development.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "mhabench", tmp_path / "mhabench", ignore=shutil.ignore_patterns("__pycache__"))
    new_file = tmp_path / "mhabench" / "impls" / "throwaway_attention.py"
    new_file.write_text(THROWAWAY, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("throwaway_attention_for_docs", new_file)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))  # what importing mhabench.impls does for it
    sys.modules.pop("throwaway_attention_for_docs", None)

    assert docs.regenerate(tmp_path, check=True), "a new implementation must leave something to regenerate"
    changed = {path.relative_to(tmp_path).as_posix() for path in docs.regenerate(tmp_path)}

    assert changed == {"README.md", "docs/masks.md", "docs/development.md"}
    assert "| `throwaway_attention` | opt-in | `fused` |" in (tmp_path / "README.md").read_text()
    masks = (tmp_path / "docs" / "masks.md").read_text()
    assert "| `throwaway_attention` | causal, none, sliding_window |" in masks
    module_map = (tmp_path / "docs" / "development.md").read_text()
    line = "- `mhabench/impls/throwaway_attention.py` — Throwaway attention for the docs test: `fused`'s layer"
    assert line in module_map
    assert module_map.index(line) < module_map.index("**YAML → config → cases**")  # among the implementations
    assert docs.regenerate(tmp_path, check=True) == []
