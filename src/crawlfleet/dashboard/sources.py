"""What the dashboard reads and changes, and the embedded crawl's implementation of it.

A ``Source`` lists crawls, reads each one (``CrawlReader``: counts, statistics, domains,
dead letters), its attempt log, items and workers, and runs the operator's actions.
``EmbeddedSource`` serves the crawl of one state directory without ever holding its
locks: reads go through ``SqliteStateReader`` and a read-only connection to
``items.sqlite``. Requeue and purge need the store itself: while the crawl runs it holds
the state file, so they are refused (``ActionRefused``) with what to do instead; once it
has stopped, the store is opened normally for the action and closed again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import CrawlfleetError, StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.protocols import DomainView
from crawlfleet.models import Attempt, DeadLetter, QueueCounts
from crawlfleet.monitoring.sqlite_reader import AttemptFilter, SqliteStateReader
from crawlfleet.runtime.backends import state_paths
from crawlfleet.runtime.wiring import domain_policy, open_frontier
from crawlfleet.settings import Settings
from crawlfleet.statedir import IDENTITY_FILE, LOCK_NAME

ITEM_ROWS = 2000
"""Data quality and samples are computed over the latest this many items stored."""


class ActionRefused(CrawlfleetError):
    """An action that cannot run now (the crawl holds its state); the message says why."""


class CrawlReader(Protocol):
    """One crawl's figures: a ``Frontier``, or the read-only state reader."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]: ...


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A worker as the fleet's heartbeats show it; ``pages_per_s`` over the last minute."""

    name: str
    seen_ago_s: float
    live: bool
    crawl: str
    concurrency: int
    queues: tuple[str, ...]
    pages_per_s: float | None = None


@dataclass(slots=True)
class ItemSample:
    """The latest items of one type: how many were read, fill counts per field, a few rows."""

    item_type: str
    read: int = 0
    filled: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def fill_rates(self) -> dict[str, float]:
        return {name: n / self.read for name, n in sorted(self.filled.items())} if self.read else {}


SAMPLES_PER_TYPE = 3


def is_filled(value: object) -> bool:
    """A field counts as filled when present and not None, "" or an empty list or dict."""
    return value is not None and value != "" and value != [] and value != {}


def sample_items(rows: Sequence[tuple[str, Any]]) -> list[ItemSample]:
    """Fill counts and samples per type from ``(item_type, data)`` rows, newest first."""
    found: dict[str, ItemSample] = {}
    for item_type, data in rows:
        if not isinstance(data, dict):
            continue
        sample = found.setdefault(item_type, ItemSample(item_type))
        sample.read += 1
        for name, value in data.items():
            sample.filled[name] = sample.filled.get(name, 0) + is_filled(value)
        if len(sample.samples) < SAMPLES_PER_TYPE:
            sample.samples.append(data)
    return [found[name] for name in sorted(found)]


class Source(Protocol):
    """Everything the dashboard shows or does, for one runtime."""

    mode: str

    async def crawl_ids(self) -> list[str]: ...

    async def reader(self, crawl_id: str) -> CrawlReader:
        """``StateError`` when there is no such crawl."""
        ...

    async def run_state(self, crawl_id: str, counts: QueueCounts) -> str:
        """``running``, ``paused``, ``finished`` or ``stopped`` (or a runtime's own word)."""
        ...

    async def attempts(self, crawl_id: str, where: AttemptFilter, limit: int) -> list[Attempt]: ...

    async def items(self, crawl_id: str) -> list[ItemSample]: ...

    async def workers(self) -> list[WorkerRow]: ...

    async def requeue_class(self, crawl_id: str, name: str) -> int: ...

    async def purge_class(self, crawl_id: str, name: str) -> int: ...

    async def set_paused(self, crawl_id: str, paused: bool) -> None: ...

    async def close(self) -> None: ...


def flock_held(path: Path) -> bool | None:
    """Whether a process holds an ``flock`` on ``path``, from ``/proc/locks`` (None: unknown).

    Looking never takes the lock, so a crawl starting meanwhile is never refused.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    try:
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in table.splitlines():
        parts = line.split()
        if "FLOCK" not in parts or "->" in parts:
            continue
        major, minor, inode = parts[parts.index("FLOCK") + 4].split(":")
        if int(inode) == st.st_ino and os.makedev(int(major, 16), int(minor, 16)) == st.st_dev:
            return True
    return False


class EmbeddedSource:
    """The crawl of one state directory (``settings.state_dir``), read-only but for actions."""

    mode = "embedded"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._state_file, self._items_file = state_paths(settings.state_dir)
        self._reader: SqliteStateReader | None = None
        self._items: sqlite3.Connection | None = None
        self.crawl_id = _crawl_id(settings)

    async def crawl_ids(self) -> list[str]:
        return [self.crawl_id] if self._state_file.exists() else []

    async def reader(self, crawl_id: str) -> SqliteStateReader:
        if crawl_id != self.crawl_id:
            raise StateError(f"no crawl {crawl_id!r} in {self._settings.state_dir}")
        if self._reader is None:
            self._reader = SqliteStateReader.open(self._state_file, domain_policy(self._settings))
        return self._reader

    def running(self) -> bool | None:
        return flock_held(self._settings.state_dir / f"{LOCK_NAME}.lock")

    async def run_state(self, crawl_id: str, counts: QueueCounts) -> str:
        from crawlfleet.runtime.control import is_paused

        if self.running():
            return "paused" if await is_paused(self._settings) else "running"
        return "finished" if counts.pending == 0 else "stopped"

    async def attempts(self, crawl_id: str, where: AttemptFilter, limit: int) -> list[Attempt]:
        return await (await self.reader(crawl_id)).attempts(where, limit)

    async def items(self, crawl_id: str) -> list[ItemSample]:
        if not self._items_file.exists():
            return []
        if self._items is None:
            uri = f"file:{quote(str(self._items_file.resolve()))}?mode=ro"
            self._items = sqlite3.connect(uri, uri=True, timeout=2.0, check_same_thread=False)
        try:
            rows = self._items.execute(
                "SELECT item_type, data FROM items WHERE crawl_id = ? ORDER BY rowid DESC LIMIT ?",
                (crawl_id, ITEM_ROWS),
            ).fetchall()
        except sqlite3.Error as exc:
            raise StateError(f"items database {self._items_file}: {exc}") from None
        return sample_items([(str(t), orjson.loads(d)) for t, d in rows])

    async def workers(self) -> list[WorkerRow]:
        return []

    async def requeue_class(self, crawl_id: str, name: str) -> int:
        from crawlfleet.monitoring.deadletters import requeue_class

        async with AsyncExitStack() as stack:
            return await requeue_class(await self._store(crawl_id, stack), name)

    async def purge_class(self, crawl_id: str, name: str) -> int:
        from crawlfleet.monitoring.deadletters import purge_class

        async with AsyncExitStack() as stack:
            return await purge_class(await self._store(crawl_id, stack), name)

    async def _store(self, crawl_id: str, stack: AsyncExitStack) -> Frontier:
        await self.reader(crawl_id)
        if self.running():
            raise ActionRefused(
                "the crawl is running and holds its state file: requeue or purge dead letters"
                " once it has stopped (or with `crawlfleet dlq` then)"
            )
        try:
            return await open_frontier(self._settings, stack)
        except StateError as exc:
            raise ActionRefused(f"cannot open the crawl's state now: {exc}") from None

    async def set_paused(self, crawl_id: str, paused: bool) -> None:
        from crawlfleet.runtime.control import set_paused

        await self.reader(crawl_id)
        await set_paused(self._settings, paused)

    async def close(self) -> None:
        if self._reader is not None:
            await self._reader.close()
        if self._items is not None:
            self._items.close()


def _crawl_id(settings: Settings) -> str:
    """The crawl id recorded in the state directory's ``crawl.json``, else the settings'."""
    try:
        stored = orjson.loads((settings.state_dir / IDENTITY_FILE).read_bytes())
        return str(stored["identity"]["crawl_id"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return settings.crawl_id
