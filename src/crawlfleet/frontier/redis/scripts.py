"""Load the Lua scripts of ``lua/`` and run them by name with their keys filled in.

Each script's header names its keys (``-- KEYS[3] req``), each a fixed key or a key family of
``keys.py``. The loader turns those lines into a preamble ``local K = {req = KEYS[3], ...}``
and ``local EPOCH = ARGV[1]`` (the crawl's epoch token, checked by every script that
writes), appends the shared helpers of ``_lib.lua``, then the script. It refuses a header
naming a key ``keys.py`` does not list, and a script that uses a key (``K.name``, itself or
through the helpers it calls) its header does not name. Scripts run with EVALSHA, and calls
made while one is on the wire go together as one pipeline (``Scripts``); a script Redis
answers NOSCRIPT for (after a restart or ``SCRIPT FLUSH``) is loaded again by redis-py's
``Script`` and run alone. Consecutive calls of a script of ``GROUPED`` in one pipeline go as one
call: that script takes the arguments of many calls one after another (after the epoch) and
answers a list, one reply a call (``finish.lua``: a worker's pages end their leases together).
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from crawlfleet.frontier.redis.keys import NAMES, CrawlKeys
from crawlfleet.redisdb import RedisClient

_KEY_LINE = re.compile(r"^-- KEYS\[(\d+)\] (\w+)\s*$", re.MULTILINE)
_FUNCTION = re.compile(r"^local function (\w+)", re.MULTILINE)
_KEY_USE = re.compile(r"\bK\.(\w+)")
_CALL = re.compile(r"\b(\w+)\(")
_COMMENT = re.compile(r"--[^\n]*")
_LIB = "_lib.lua"
GROUPED = frozenset({"finish"})


@dataclass(frozen=True, slots=True)
class LuaSource:
    """One script's full text and the key names it takes, in ``KEYS`` order."""

    name: str
    text: str
    key_names: tuple[str, ...]


def read_sources(folder: Traversable | None = None) -> Mapping[str, LuaSource]:
    """Every script in ``folder`` (default ``lua/``) except the helpers, ready to load.

    ``ValueError`` when a header's ``KEYS`` are not numbered 1..n, name a key that
    ``keys.py`` does not list, or miss a key the script uses.
    """
    if folder is None:
        return _packaged()
    return _read(folder)


@functools.cache
def _packaged() -> Mapping[str, LuaSource]:
    """The package's own scripts, read and checked once a process: ~15 ms of regular
    expressions, which every store a process opened paid again (a worker's first task, the
    dispatcher's start)."""
    return _read(resources.files("crawlfleet.frontier.redis") / "lua")


def _read(folder: Traversable) -> dict[str, LuaSource]:
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
    return set(_CALL.findall(body)) & helpers.keys()


def _uses(body: str, lib_keys: dict[str, set[str]]) -> set[str]:
    used = set(_KEY_USE.findall(body))
    for helper in _called(body, lib_keys):
        used |= lib_keys[helper]
    return used


class Scripts:
    """The frontier's scripts bound to one client and one crawl's keys.

    Calls made while an earlier one is on the wire wait for it and then go together, as one
    pipeline (``transaction=False``): each script stays atomic on its own and answers its own
    caller, but one write, one read and one turn of Redis's event loop (with its AOF write)
    serve them all. A worker's pages end their leases a few at a time this way (decision
    0024); a lone call goes at once.
    """

    def __init__(self, client: RedisClient, keys: CrawlKeys) -> None:
        self._client = client
        self._bound: dict[str, tuple[AsyncScript, list[str]]] = {
            name: (client.register_script(src.text), [keys.key(k) for k in src.key_names])
            for name, src in read_sources().items()
        }
        self._waiting: list[_Call] = []
        self._sender: asyncio.Task[None] | None = None

    async def run(self, name: str, epoch: str, *args: str | int | float) -> Any:
        """Run one script with ``ARGV[1]`` = ``epoch``, then ``args``."""
        script, keys = self._bound[name]
        answer = asyncio.get_running_loop().create_future()
        call = _Call(script, keys, [epoch, *args], answer, grouped=name in GROUPED)
        self._waiting.append(call)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send())
        return await call.answer

    async def _send(self) -> None:
        batch: list[_Call] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                batch = [call for call in batch if not call.answer.done()]
                if len(batch) == 1:
                    await batch[0].run_alone()
                elif batch:
                    await self._send_together(batch)
        finally:
            # Cancelled (the loop shutting down): no caller may wait for an answer that
            # will not come, whether its call was on the wire or still waiting.
            left, self._waiting = [*batch, *self._waiting], []
            for call in left:
                if not call.answer.done():
                    call.answer.cancel()

    async def _send_together(self, batch: list[_Call]) -> None:
        sent: list[list[_Call]] = []  # the calls of each script call on the wire
        for call in batch:
            if sent and sent[-1][0].joins(call):
                sent[-1].append(call)
            else:
                sent.append([call])
        pipe = self._client.pipeline(transaction=False)
        for calls in sent:
            first = calls[0]
            args = [*first.args, *(arg for call in calls[1:] for arg in call.args[1:])]
            pipe.execute_command("EVALSHA", first.script.sha, len(first.keys), *first.keys, *args)
        try:
            answers = await pipe.execute(raise_on_error=False)
        except Exception as exc:
            for call in batch:
                call.fail(exc)
            return
        for calls, answer in zip(sent, answers, strict=True):
            if isinstance(answer, NoScriptError):  # not run: Redis lost its script cache
                for call in calls:
                    await call.run_alone()
            elif isinstance(answer, Exception):
                for call in calls:
                    call.fail(answer)
            elif calls[0].grouped:
                for call, reply in zip(calls, answer, strict=True):
                    call.settle(reply)
            else:
                calls[0].settle(answer)


@dataclass(slots=True)
class _Call:
    """One script call waiting for its turn, and the future its caller awaits; a ``grouped``
    script's reply is a list of one reply a call."""

    script: AsyncScript
    keys: list[str]
    args: list[str | int | float]
    answer: asyncio.Future[Any]
    grouped: bool = False

    async def run_alone(self) -> None:
        """Run through ``AsyncScript``, which loads the script when Redis answers NOSCRIPT."""
        try:
            result = await self.script(keys=self.keys, args=self.args)
        except Exception as exc:
            self.fail(exc)
        else:
            self.settle(result[0] if self.grouped else result)

    def joins(self, call: _Call) -> bool:
        """Whether ``call`` can go in one script call with this one: the same script of
        ``GROUPED``, on the same epoch (``ARGV[1]``, which the script reads once)."""
        return self.grouped and call.script is self.script and call.args[0] == self.args[0]

    def settle(self, reply: Any) -> None:
        if isinstance(reply, Exception):  # an error reply within a grouped script's list
            self.fail(reply)
        elif not self.answer.done():
            self.answer.set_result(reply)

    def fail(self, exc: Exception) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc)
