"""``"module:name"`` references from the config (processors, hooks) turned into objects.

The module part is a dotted module name importable from the crawl's path, or a path to a
``.py`` file (``parsers/steps.py:clean``); the name part may be dotted (``steps:Cleaner.run``).
Every failure is a ``ConfigError`` naming the setting and the reference.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType

from crawlfleet.errors import ConfigError


def resolve(reference: str, setting: str) -> object:
    """The object ``reference`` names; ``setting`` is named in errors (``processors``)."""
    module_name, colon, attribute = reference.strip().rpartition(":")
    if not colon or not module_name or not attribute:
        raise ConfigError(f"{setting}: {reference!r} is not 'module:name'")
    try:
        module = import_module_or_file(module_name)
    except ConfigError:
        raise
    except Exception as exc:
        last = traceback.format_exception_only(exc)[-1].strip()
        raise ConfigError(f"{setting}: cannot import {module_name!r} ({last})") from None
    found: object = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ConfigError(f"{setting}: {module_name!r} has no {attribute!r}")
        found = getattr(found, part)
    return found


def import_module_or_file(source: str, what: str = "module") -> ModuleType:
    """The module ``source`` names: a dotted name, or a ``.py`` path imported once per file.

    A missing file or one that is not a module is a ``ConfigError`` naming ``what``; what the
    module itself raises while loading is raised as it is.
    """
    source = source.strip()
    if not (source.endswith(".py") or "/" in source or "\\" in source):
        return importlib.import_module(source)
    path = Path(source)
    if not path.is_file():
        raise ConfigError(f"{what} file not found: {path}")
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    name = f"crawlfleet_module_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {what} file {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[name]
        raise
    return module
