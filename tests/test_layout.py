"""The package layout is the data path: imports only run downward, nothing imports in a circle, the
module map in docs/development.md matches the tree, and no line is exempted from the formatter."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mhabench"
MODULE_MAP = ROOT / "docs" / "development.md"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "torch_errors", "version"}),
    frozenset({"cost", "pattern", "stage_cost"}),
    frozenset({"impls"}),
    frozenset({"scenario"}),
    frozenset({"results"}),
    frozenset({"measure"}),
    frozenset({"run"}),
    frozenset({"distributed"}),
    frozenset({"analysis"}),
    frozenset({"answers_on_disk"}),
    frozenset({"findings"}),
    frozenset({"views"}),
    frozenset({"probe"}),
    frozenset({"checks"}),
    frozenset({"history"}),
    frozenset(
        {
            "cli",
            "cli_calibrate",
            "cli_claims",
            "cli_gate",
            "cli_run",
            "cli_replicate",
            "cli_shell",
            "__main__",
            "profiled",
            "mhabench",
        }
    ),
)
"""Lowest first. A module may import its own layer and any lower one; the circle test keeps a layer's
units from importing each other both ways."""


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    """``mhabench.run.case`` → ``run``; the package root is ``mhabench``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mhabench"


def layer(module: str) -> int:
    name = unit(module)
    return next(index for index, units in enumerate(LAYERS) if name in units)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: set[str]) -> str | None:
    """The longest known module that ``name`` starts with (``a.b.Class`` → ``a.b``)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """Every mhabench module that ``module`` imports, deferred imports inside functions included."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name, known) if name.startswith("mhabench") else None
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def test_every_module_has_a_layer() -> None:
    missing = sorted({unit(name) for name in modules()} - set().union(*LAYERS))
    assert not missing, f"units with no layer in LAYERS: {missing}"


def test_no_upward_imports() -> None:
    upward = [
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        for target in sorted(targets)
        if layer(target) > layer(source)
    ]
    assert not upward, "\n".join(upward)


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for target in sorted(graph.get(node, ())):
            if target == start:
                return [*path, start]
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return None


def test_no_import_circles() -> None:
    graph = import_graph()
    # A package's __init__ that only re-exports its own modules is not a circle with them.
    graph = {
        source: {
            t for t in targets if not (source.startswith(t + ".") and (PACKAGE.parent / t.replace(".", "/")).is_dir())
        }
        for source, targets in graph.items()
    }
    circles = [cycle for name in graph if (cycle := _cycle_from(name, graph))]
    assert not circles, " → ".join(circles[0])


def test_a_circle_is_found() -> None:
    """The circle finder itself: a two-module circle and a three-module one are found, a chain is not."""
    assert _cycle_from("a", {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _cycle_from("a", {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle_from("a", {"a": {"b"}, "b": {"c"}, "c": set()}) is None


def holds_code(path: Path) -> bool:
    """A folder's ``__init__.py`` that is only a docstring is not a module to describe."""
    body = ast.parse(path.read_text()).body
    return path.name != "__init__.py" or any(not isinstance(node, ast.Expr) for node in body)


def test_module_map_matches_the_tree() -> None:
    """docs/development.md names every module under mhabench/, and no file that does not exist."""
    named = set(re.findall(r"`(mhabench/[\w/]+\.py)`", MODULE_MAP.read_text()))
    on_disk = {str(path.relative_to(ROOT)) for path in PACKAGE.rglob("*.py") if holds_code(path)}
    assert not sorted(on_disk - named), f"modules missing from the module map: {sorted(on_disk - named)}"
    assert not sorted(named - on_disk), f"the module map names missing files: {sorted(named - on_disk)}"


@pytest.mark.parametrize("folder", ["mhabench", "tests"])
def test_no_formatter_exemptions(folder: str) -> None:
    marker = "fmt: " + "skip"
    exempt = [str(path) for path in (ROOT / folder).rglob("*.py") if marker in path.read_text()]
    assert not exempt, f"{marker} in {exempt}"
