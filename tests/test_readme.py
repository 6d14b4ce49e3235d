"""README.md is a manual: its implementation table is generated, and its quick start is the two commands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- begin: mhabench list --markdown (generated; a test keeps it equal to the command's output) -->"
END = "<!-- end: mhabench list --markdown -->"


def readme_block(text: str) -> str:
    """The text between the two markers, without the newlines that frame it."""
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README.md must hold the markers once each"
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def test_readme_implementation_table_is_the_list_command_output() -> None:
    """Regenerate with `mhabench list --markdown` and paste it between the markers.

    A fresh process, not CliRunner: it sees the built-in registry only, never an implementation that a test
    of this session registered (a plugin, a throwaway), exactly as a reader's `mhabench list` does."""
    done = subprocess.run(
        [sys.executable, "-m", "mhabench", "list", "--markdown"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert readme_block(README.read_text(encoding="utf-8")) == done.stdout.strip("\n")


def quick_start(text: str) -> str:
    """The README's "Quick start" section, up to the next heading."""
    return text.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def test_the_quick_start_is_exactly_the_two_commands() -> None:
    """The promise a newcomer reads first: one shell block, `make run` and `make test`, nothing else to type.

    What the README holds beyond it is shaped by its sections and docs/, not by a line count."""
    section = quick_start(README.read_text(encoding="utf-8"))
    blocks = section.split("```sh\n")[1:]
    assert len(blocks) == 1, "the quick start has one shell block"
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].split("```", 1)[0].splitlines()]
    assert [command for command in commands if command] == ["make run", "make test"]


def test_the_glossary_explains_the_words_a_newcomer_looks_up_and_the_run_table_points_to_it() -> None:
    """Issue 29: roofline eff., FLOP/B, ridge, noisy, paired, counted vs modelled had to be looked up elsewhere."""
    from mhabench.views.run_notes import LEGEND

    text = README.read_text(encoding="utf-8")
    glossary = text.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    for term in (
        "**paired**",
        "**noisy**",
        "**FLOP/B**",
        "**ridge**",
        "**roofline eff.**",
        "**counted**",
        "**modelled**",
    ):
        assert term in glossary, term
    assert "README.md" in LEGEND and "Glossary" in LEGEND and "\n" not in LEGEND
    assert "make hf" in text and "Chromium through apt" in text
