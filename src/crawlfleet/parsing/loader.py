"""Build a ``ParserRegistry`` from parser modules, entry points and selector declarations.

Sources are strings (a dotted module name or a path to a ``.py`` file) so that another
process, such as a Celery worker, can load the same parsers from the crawl definition.
Every installed entry point in the ``crawlfleet.parsers`` group is loaded too: it may name a
module (all its marked functions) or one marked function.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.declarative import selector_parser
from crawlfleet.parsing.default import default_parser
from crawlfleet.parsing.plugins import marked, spec_of
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.references import import_module_or_file

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
    try:
        return import_module_or_file(source, "parser")
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"cannot load parser module {source!r}: {_last_line(exc)}") from None


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
