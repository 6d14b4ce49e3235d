"""User implementations from outside the package: ``--plugin file.py`` and ``file.py:Class`` config entries.

A plugin file is imported under a unique module name; it may call ``@mhabench.register(...)``
itself (``--plugin``), or expose a class taking ``(weights, heads, pattern)`` that a config names as
``"path/to/file.py:MyAttention"`` (registered under the class name with no cost model, so its
modelled columns stay empty rather than borrowing another layout's figures). Every
problem is a one-line :class:`PluginError` naming the file — a user's typo is not a traceback.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from mhabench.errors import PluginError, RegistryError, shorten
from mhabench.impls.registry import available_implementations, core_implementations, get_spec, register
from mhabench.pattern import PLAIN

# resolved plugin path → (module, names it registered): a file imported twice would register twice
_LOADED: dict[Path, tuple[ModuleType, list[str]]] = {}
# every plugin file and ``file.py:Class`` entry loaded, as absolute paths, in load order
_SOURCES: dict[str, None] = {}


def load_plugin(path: str | Path) -> list[str]:
    """Import the plugin file at ``path``; return the implementation names it registered."""
    module_and_names = _import(Path(path))
    _SOURCES.setdefault(str(Path(path).expanduser().resolve()), None)
    return module_and_names[1]


def loaded_plugin_files() -> tuple[str, ...]:
    """Every plugin this process loaded: absolute ``file.py`` paths and ``/abs/file.py:Class`` entries.

    A spawned child (``isolation: process``) and a resumed run start with only the built-ins
    registered; loading these again gives them the same implementations under the same names.
    """
    return tuple(_SOURCES)


def load_plugin_files(sources: Iterable[str]) -> None:
    """Load what :func:`loaded_plugin_files` returned in another process (a missing file: one-line error)."""
    for source in sources:
        if is_class_entry(source):
            register_class_entry(source, Path.cwd())
        else:
            load_plugin(source)


def import_tagged(path: Path, tag: str) -> list[str]:
    """Import the plugin file at ``path`` once more under ``tag`` (one module per tag, even for one file); return
    the names it registered. ``mhabench ab`` renames them, so two versions of one file can share a process."""
    return _import(path, tag)[1]


def _import(path: Path, tag: str = "") -> tuple[ModuleType, list[str]]:
    where = _printable(path)
    try:
        resolved = path.expanduser().resolve()
        is_file = resolved.is_file()
    except (OSError, RuntimeError) as exc:  # a name too long for the OS, an unknown ~user, a symlink loop
        raise PluginError(f"{where}: cannot open the plugin file ({getattr(exc, 'strerror', None) or exc})") from None
    loaded = Path(f"{resolved}#{tag}") if tag else resolved
    if loaded in _LOADED:
        return _LOADED[loaded]
    if not is_file:
        raise PluginError(f"{where}: no such plugin file")
    digest = hashlib.sha1(str(loaded).encode()).hexdigest()[:10]
    module_name = f"mhabench_plugin_{re.sub(r'[^0-9A-Za-z_]', '_', resolved.stem)}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise PluginError(f"{where}: not a Python file (a plugin is a .py file)")
    module = importlib.util.module_from_spec(spec)
    before = set(available_implementations())
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise PluginError(f"{where}: syntax error at line {exc.lineno}: {exc.msg}") from None
    except (Exception, SystemExit) as exc:  # whatever the user's module raises while importing
        sys.modules.pop(module_name, None)
        detail = str(exc).strip().splitlines()
        raise PluginError(f"{where}: importing it raised {type(exc).__name__}: {detail[0] if detail else ''}") from None
    added = [name for name in available_implementations() if name not in before]
    _LOADED[loaded] = (module, added)
    return _LOADED[loaded]


def _printable(path: Path) -> str:
    """``path`` for a one-line message: control characters escaped, cut to a readable length."""
    return shorten(repr(str(path))[1:-1], 200)


def is_class_entry(entry: str) -> bool:
    """``"path/to/file.py:MyAttention"`` rather than a registered name."""
    file_part, sep, attr = entry.rpartition(":")
    return bool(sep) and file_part.endswith(".py") and bool(attr)


def register_class_entry(entry: str, base_dir: Path) -> str:
    """Load ``file.py:Class`` (relative to ``base_dir``), register the class, return its registry name."""
    file_part, _, attr = entry.rpartition(":")
    path = Path(file_part).expanduser()
    module, _ = _import(path if path.is_absolute() else base_dir / path)
    factory = getattr(module, attr, None)
    if factory is None:
        defined = sorted(name for name, value in vars(module).items() if inspect.isclass(value))
        raise PluginError(f"{file_part}: no class {attr!r} in the plugin (classes defined: {', '.join(defined)})")
    _check_signature(factory, f"{file_part}:{attr}")
    existing = [name for name in available_implementations() if get_spec(name).factory is factory]
    if not existing:  # else the file registered it itself, or the entry was already loaded
        try:
            register(attr, description=f"plugin {file_part}:{attr}", cost=None)(factory)
        except RegistryError as exc:
            raise PluginError(f"{file_part}:{attr}: {exc}") from None
    _SOURCES.setdefault(f"{module.__file__}:{attr}", None)
    return existing[0] if existing else attr


def _check_signature(factory: object, where: str) -> None:
    """The class must accept ``(weights, heads, pattern)`` like every built-in implementation (a class written
    before patterns takes ``(weights, heads, causal)``: still accepted, deprecated, see the registry)."""
    if not callable(factory):
        raise PluginError(f"{where}: is a {type(factory).__name__}, not a class taking (weights, heads, pattern)")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return  # a builtin without introspectable signature: let the first call tell
    try:
        signature.bind(object(), 1, PLAIN)
    except TypeError:
        raise PluginError(f"{where}: must take (weights, heads, pattern), its signature is {signature}") from None


def with_plugin_implementations(implementations: list[str] | None, added: list[str]) -> list[str] | None:
    """A config's implementation list plus the ones ``--plugin`` files registered (None = unchanged)."""
    if not added:
        return implementations
    return list(dict.fromkeys([*(implementations or core_implementations()), *added]))
