"""Load the Lua scripts of ``lua/`` and run them by name with their keys filled in.

Each script's header names its keys (``-- KEYS[3] req``), each a fixed key or a key family of
``keys.py``. The loader turns those lines into a preamble ``local K = {req = KEYS[3], ...}``
and ``local EPOCH = ARGV[1]`` (the crawl's epoch token, checked by every script that
writes), appends the shared helpers of ``_lib.lua``, then the script. It refuses a header
naming a key ``keys.py`` does not list, and a script that uses a key (``K.name``, itself or
through the helpers it calls) its header does not name. Scripts run with EVALSHA; redis-py's
``Script`` loads a script again when Redis answers NOSCRIPT (after a restart or
``SCRIPT FLUSH``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from redis.commands.core import AsyncScript

from crawlfleet.frontier.redis.connection import RedisClient
from crawlfleet.frontier.redis.keys import NAMES, CrawlKeys

_KEY_LINE = re.compile(r"^-- KEYS\[(\d+)\] (\w+)\s*$", re.MULTILINE)
_FUNCTION = re.compile(r"^local function (\w+)", re.MULTILINE)
_KEY_USE = re.compile(r"\bK\.(\w+)")
_COMMENT = re.compile(r"--[^\n]*")
_LIB = "_lib.lua"


@dataclass(frozen=True, slots=True)
class LuaSource:
    """One script's full text and the key names it takes, in ``KEYS`` order."""

    name: str
    text: str
    key_names: tuple[str, ...]


def read_sources(folder: Traversable | None = None) -> dict[str, LuaSource]:
    """Every script in ``folder`` (default ``lua/``) except the helpers, ready to load.

    ``ValueError`` when a header's ``KEYS`` are not numbered 1..n, name a key that
    ``keys.py`` does not list, or miss a key the script uses.
    """
    if folder is None:
        folder = resources.files("crawlfleet.frontier.redis") / "lua"
    lib = (folder / _LIB).read_text(encoding="utf-8")
    lib_keys = _helper_keys(_COMMENT.sub("", lib))
    sources: dict[str, LuaSource] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".lua") or entry.name == _LIB:
            continue
        name = entry.name.removesuffix(".lua")
        body = entry.read_text(encoding="utf-8")
        key_names = _header_keys(name, body)
        used = _uses(_COMMENT.sub("", body), lib_keys)
        missing = sorted(used - set(key_names))
        if missing:
            raise ValueError(f"{name}.lua uses keys its header does not name: {missing}")
        fields = ", ".join(f"{key} = KEYS[{i}]" for i, key in enumerate(key_names, 1))
        preamble = f"local K = {{{fields}}}\nlocal EPOCH = ARGV[1]\n"
        sources[name] = LuaSource(name, f"{preamble}{lib}\n{body}", key_names)
    return sources


def _header_keys(name: str, body: str) -> tuple[str, ...]:
    found = [(int(index), key) for index, key in _KEY_LINE.findall(body)]
    if [index for index, _ in found] != list(range(1, len(found) + 1)):
        raise ValueError(f"{name}.lua: KEYS in the header must be numbered 1..n in order")
    unknown = [key for _, key in found if key not in NAMES]
    if unknown:
        raise ValueError(f"{name}.lua: unknown keys {unknown} (see keys.py)")
    return tuple(key for _, key in found)


def _helper_keys(lib: str) -> dict[str, set[str]]:
    """Each helper of ``_lib.lua`` -> the keys it uses, itself or through other helpers."""
    starts = [(m.start(), m.group(1)) for m in _FUNCTION.finditer(lib)]
    bodies = {
        name: lib[start : starts[i + 1][0] if i + 1 < len(starts) else len(lib)]
        for i, (start, name) in enumerate(starts)
    }
    direct = {name: set(_KEY_USE.findall(body)) for name, body in bodies.items()}
    calls = {name: _called(body, bodies) - {name} for name, body in bodies.items()}
    closed = {name: set(keys) for name, keys in direct.items()}
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            before = len(closed[name])
            for callee in callees:
                closed[name] |= closed[callee]
            changed |= len(closed[name]) != before
    return closed


def _called(body: str, helpers: dict[str, Any]) -> set[str]:
    return {name for name in helpers if re.search(rf"\b{name}\(", body)}


def _uses(body: str, lib_keys: dict[str, set[str]]) -> set[str]:
    used = set(_KEY_USE.findall(body))
    for helper in _called(body, lib_keys):
        used |= lib_keys[helper]
    return used


class Scripts:
    """The frontier's scripts bound to one client and one crawl's keys."""

    def __init__(self, client: RedisClient, keys: CrawlKeys) -> None:
        self._bound: dict[str, tuple[AsyncScript, list[str]]] = {
            name: (client.register_script(src.text), [keys.key(k) for k in src.key_names])
            for name, src in read_sources().items()
        }

    async def run(self, name: str, epoch: str, *args: str | int | float) -> Any:
        """Run one script with ``ARGV[1]`` = ``epoch``, then ``args``."""
        script, keys = self._bound[name]
        return await script(keys=keys, args=[epoch, *args])
