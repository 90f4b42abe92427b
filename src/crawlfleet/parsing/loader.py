"""Build a ``ParserRegistry`` from parser modules, entry points and selector declarations.

Sources are strings (a dotted module name or a path to a ``.py`` file) so that another
process, such as a Celery worker, can load the same parsers from the crawl definition.
Every installed entry point in the ``crawlfleet.parsers`` group is loaded too: it may name a
module (all its marked functions) or one marked function.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.declarative import selector_parser
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.plugins import marked, spec_of
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.registry import ParserRegistry

ENTRY_POINT_GROUP = "crawlfleet.parsers"


def load_parsers(
    sources: Sequence[str],
    selector_specs: Sequence[Mapping[str, Any]] = (),
    *,
    use_entry_points: bool = True,
    default: Parser = default_parser,
) -> ParserRegistry:
    """A registry of every marked function in ``sources`` and entry points, and selector parsers.

    Raises ``ConfigError`` naming the module when one cannot be imported, and for parser
    declarations that clash or are invalid.
    """
    registry = ParserRegistry(default=default)
    found: set[int] = set()
    for source in sources:
        module = import_source(source)
        _add_marked(registry, vars(module).values(), source, found)
    if use_entry_points:
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            label = f"entry point {entry.name!r} ({entry.value})"
            try:
                loaded = entry.load()
            except Exception as exc:
                raise ConfigError(f"cannot load parser {label}: {_last_line(exc)}") from None
            values = vars(loaded).values() if isinstance(loaded, ModuleType) else [loaded]
            _add_marked(registry, values, label, found)
    for declaration in selector_specs:
        registry.add(selector_parser(declaration))
    return registry


def import_source(source: str) -> ModuleType:
    """The module named by ``source`` (dotted name or ``.py`` path), imported once."""
    source = source.strip()
    is_path = source.endswith(".py") or "/" in source or "\\" in source
    try:
        return _import_path(Path(source)) if is_path else importlib.import_module(source)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot load parser module {source!r}: {_last_line(exc)}") from None


def _import_path(path: Path) -> ModuleType:
    if not path.is_file():
        raise ConfigError(f"parser file not found: {path}")
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    name = f"crawlfleet_parsers_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load parser file {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module


def _add_marked(
    registry: ParserRegistry, values: Iterable[object], source: str, found: set[int]
) -> None:
    """Add each marked function among ``values`` not already added (re-exports are skipped)."""
    for value in values:
        meta = marked(value)
        if meta is None or id(value) in found:
            continue
        found.add(id(value))
        registry.add(spec_of(value, meta, source))  # type: ignore[arg-type]


def _last_line(exc: BaseException) -> str:
    return traceback.format_exception_only(exc)[-1].strip()
