"""Load the Lua scripts of ``lua/`` and run them by name with their keys filled in.

Each script's header names its keys (``-- KEYS[3] req``), each a fixed key or a key family of
``keys.py``. The loader turns those lines into a preamble ``local K = {req = KEYS[3], ...}`` and
``local EPOCH = ARGV[1]`` (the crawl's epoch token, checked by every script that writes),
appends the shared helpers of ``_lib.lua``, then the script. Scripts run with EVALSHA; redis-py's ``Script``
loads a script again when Redis answers NOSCRIPT (after a restart or ``SCRIPT FLUSH``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from crawlfleet.frontier.redis.keys import NAMES, CrawlKeys

_KEY_LINE = re.compile(r"^-- KEYS\[(\d+)\] (\w+)\s*$", re.MULTILINE)
_LIB = "_lib.lua"


@dataclass(frozen=True, slots=True)
class LuaSource:
    """One script's full text and the key names it takes, in ``KEYS`` order."""

    name: str
    text: str
    key_names: tuple[str, ...]


def read_sources() -> dict[str, LuaSource]:
    """Every script in ``lua/`` (except the helpers), ready to load."""
    folder = resources.files("crawlfleet.frontier.redis") / "lua"
    lib = (folder / _LIB).read_text(encoding="utf-8")
    sources: dict[str, LuaSource] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".lua") or entry.name == _LIB:
            continue
        name = entry.name.removesuffix(".lua")
        body = entry.read_text(encoding="utf-8")
        key_names = _header_keys(name, body)
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


class Scripts:
    """The frontier's scripts bound to one client and one crawl's keys."""

    def __init__(self, client: Redis, keys: CrawlKeys) -> None:
        self._bound: dict[str, tuple[AsyncScript, list[str]]] = {
            name: (client.register_script(src.text), [keys.key(k) for k in src.key_names])
            for name, src in read_sources().items()
        }

    async def run(self, name: str, epoch: str, *args: str | int | float) -> Any:
        """Run one script with ``ARGV[1]`` = ``epoch``, then ``args``."""
        script, keys = self._bound[name]
        return await script(keys=keys, args=[epoch, *args])
