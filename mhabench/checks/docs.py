"""``make docs`` (``python -m mhabench.checks.docs [--check]``): every generated part of the docs, regenerated.

Four parts of the docs are read off the code, so adding an implementation is one file plus this command:

- the README's implementation table (between its ``mhabench list --markdown`` markers), from the registry;
- docs/masks.md's capability table (between its ``patterns`` markers), from each implementation's capabilities;
- docs/columns.md, the column reference, from the result schema;
- docs/development.md's module map: a module it does not name gets a line, ``- `path` — <first line of the
  module's docstring>``, after the last line of its own folder. The line is a start: the map is written prose,
  so say more there by hand; an existing line is never rewritten.

``--check`` changes nothing and exits 1 when a part is out of date (what CI or a test runs).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

from mhabench.results.columns import reference_markdown
from mhabench.views.implementations import implementations_markdown, patterns_markdown

README_BEGIN = "<!-- begin: mhabench list --markdown (generated; a test keeps it equal to the command's output) -->"
README_END = "<!-- end: mhabench list --markdown -->"
MASKS_BEGIN, MASKS_END = "<!-- patterns:begin -->", "<!-- patterns:end -->"
MODULE_MAP = Path("docs") / "development.md"
MAP_PATH = re.compile(r"`(mhabench/[\w/]+\.py)`")


def between(text: str, begin: str, end: str, block: str, where: str) -> str:
    """``text`` with what lies between the markers replaced by ``block`` (one marker pair, each on its own line)."""
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"{where}: needs the markers {begin!r} and {end!r} once each")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}\n{end}{tail}"


def documented_modules(package: Path) -> list[Path]:
    """Every module of the package the map must name (a folder's docstring-only ``__init__.py`` is not one)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        if path.name != "__init__.py" or any(not isinstance(node, ast.Expr) for node in body):
            found.append(path)
    return found


def first_docstring_line(path: Path) -> str:
    """The first line of a module's docstring: what its map line starts from."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return docstring.strip().splitlines()[0] if docstring.strip() else "(no docstring: say what it holds)"


def with_module_lines(text: str, root: Path) -> str:
    """The module map with a line for every module it does not name, each after its folder's last line."""
    lines = text.split("\n")
    for path in documented_modules(root / "mhabench"):
        relative = path.relative_to(root).as_posix()
        if f"`{relative}`" in "\n".join(lines):
            continue
        entries = [index for index, line in enumerate(lines) if line.startswith("- `mhabench/")]
        folder = relative.rsplit("/", 1)[0] + "/"
        siblings = [index for index in entries if any(p.startswith(folder) for p in MAP_PATH.findall(lines[index]))]
        anchor = (siblings or entries or [len(lines) - 1])[-1]
        while anchor + 1 < len(lines) and lines[anchor + 1].startswith("  "):  # the entry's continuation lines
            anchor += 1
        lines.insert(anchor + 1, f"- `{relative}` — {first_docstring_line(path).replace('``', '`')}")
    return "\n".join(lines)


def parts(root: Path) -> dict[Path, Callable[[str], str]]:
    """Each generated file and how its text is brought up to date."""
    return {
        root / "README.md": lambda text: between(
            text, README_BEGIN, README_END, implementations_markdown(), "README.md"
        ),
        root / "docs" / "masks.md": lambda text: between(
            text, MASKS_BEGIN, MASKS_END, patterns_markdown(), "docs/masks.md"
        ),
        root / "docs" / "columns.md": lambda _text: reference_markdown() + "\n",
        root / MODULE_MAP: lambda text: with_module_lines(text, root),
    }


def regenerate(root: Path, check: bool = False) -> list[Path]:
    """Bring every generated part under ``root`` up to date (``check``: only say which are not); the stale files."""
    stale = []
    for path, update in parts(root).items():
        text = path.read_text(encoding="utf-8")
        fresh = update(text)
        if fresh != text:
            stale.append(path)
            if not check:
                path.write_text(fresh, encoding="utf-8")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mhabench.checks.docs", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a part is out of date")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the checkout (default: here)")
    args = parser.parse_args(argv)
    stale = regenerate(args.root, check=args.check)
    for path in stale:
        print(f"{'out of date' if args.check else 'regenerated'}: {path.relative_to(args.root)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
