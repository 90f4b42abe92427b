"""``"module:name"`` references from the config (processors, hooks) turned into objects.

The module part is a dotted module name importable from the crawl's path, or a path to a
``.py`` file (``parsers/steps.py:clean``); the name part may be dotted (``steps:Cleaner.run``).
Every failure is a ``ConfigError`` naming the setting and the reference.
"""

from __future__ import annotations

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
        module = _import(module_name)
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


def _import(name: str) -> ModuleType:
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    if not path.is_file():
        raise ConfigError(f"file not found: {path}")
    resolved = path.resolve()
    module_name = f"crawlfleet_ref_{abs(hash(str(resolved))):x}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        del sys.modules[module_name]
        raise
    return module
