"""The operations of the embedded crawl of one state directory.

``EmbeddedOperations`` never holds the crawl's locks: reads go through ``SqliteStateReader``
and a read-only connection to ``items.sqlite``. Requeue, purge and re-opening a parser need
the store itself: while the crawl runs it holds the state file, so they are refused
(``ActionRefused``) with what to do instead; once it has stopped, the store is opened
normally for the action and closed again. Pause and resume are the file ``<state>/paused``
(``runtime/control.py``); cancel and add are for distributed crawls (``ConfigError``). Its workers table has one row, the crawl process: named as its attempts name
it, seen at its last attempt, its in-flight steps the requests leased, its pages/s the rate
of attempts ended (every outcome, as a worker counts its steps).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.sqlite.reader import SqliteStateReader
from crawlfleet.monitoring.deadletters import purge_class, requeue_class, resolve_fingerprints
from crawlfleet.monitoring.metric_snapshot import Beat
from crawlfleet.monitoring.samples import DIRECTORY as SAMPLES
from crawlfleet.ops.protocols import (
    ITEM_ROWS,
    ActionRefused,
    Added,
    ItemSample,
    WorkerRow,
    sample_items,
)
from crawlfleet.ops.workers import WorkerRates
from crawlfleet.proxies.protocols import ProxyState
from crawlfleet.records import Attempt, AttemptFilter, Outcome, QueueCounts
from crawlfleet.runtime.backends import open_proxy_stores, state_paths
from crawlfleet.runtime.control import FileControl, RunState
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.step.drift import resume
from crawlfleet.runtime.wiring import open_frontier
from crawlfleet.settings import Settings
from crawlfleet.statedir import IDENTITY_FILE, LOCK_NAME, PAUSE_FILE, recorded_politeness

PROCESS = "crawl process"
"""The workers table's name for the embedded crawl before its first attempt."""


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


class EmbeddedOperations:
    """The crawl of one state directory (``settings.state_dir``), read-only but for actions."""

    mode = "embedded"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._state_file, self._items_file = state_paths(settings.state_dir)
        self._reader: SqliteStateReader | None = None
        self._items: sqlite3.Connection | None = None
        self._rates = WorkerRates()
        self._control = FileControl(settings.state_dir)
        self.crawl_id = _crawl_id(settings)

    async def probe(self) -> None:
        """``ConfigError`` when the state directory is missing; its files are opened per read."""
        if not self._settings.state_dir.is_dir():
            raise ConfigError(f"no state directory {self._settings.state_dir}")

    def describe(self, crawl_id: str) -> str:
        return f"crawl in {self._settings.state_dir}"

    async def crawl_ids(self) -> list[str]:
        return [self.crawl_id] if self._state_file.exists() else []

    async def reader(self, crawl_id: str) -> SqliteStateReader:
        if crawl_id != self.crawl_id:
            raise StateError(f"no crawl {crawl_id!r} in {self._settings.state_dir}")
        if self._reader is None:
            # the running crawl's own delays (crawl.json), not this process's defaults
            recorded = recorded_politeness(self._settings.state_dir)
            policy = domain_policy(self._settings.model_copy(update=recorded))
            self._reader = SqliteStateReader.open(self._state_file, policy)
        return self._reader

    def running(self) -> bool | None:
        return flock_held(self._settings.state_dir / f"{LOCK_NAME}.lock")

    async def asked(self, crawl_id: str) -> RunState:
        self._check(crawl_id)
        return await self._control.state()

    async def run_state(self, crawl_id: str, counts: QueueCounts) -> str:
        if self.running():
            return "paused" if await self.asked(crawl_id) is RunState.PAUSED else "running"
        return "finished" if counts.pending == 0 else "stopped"

    async def no_worker(self, crawl_id: str) -> str | None:
        """None: the crawl process is its own worker."""
        return None

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
        """One row, the crawl process; none before the crawl has a state file."""
        if not self._state_file.exists():
            return []
        reader = await self.reader(self.crawl_id)
        counts = await reader.counts()
        now = time.time()
        last = await reader.attempts(AttemptFilter(), 1)
        seen_at = last[0].at if last else self._state_file.stat().st_mtime
        live = bool(self.running())
        stats = await reader.stats()
        steps = sum(stats.get(f"outcome.{outcome.value}") for outcome in Outcome)
        rate = self._rates.observe(PROCESS, now, steps)
        return [
            WorkerRow(
                name=last[0].worker if last else PROCESS,
                seen_ago_s=max(0.0, now - seen_at),
                live=live,
                crawl=self.crawl_id,
                concurrency=self._settings.concurrency,
                queues=("embedded",),
                in_flight=counts.leased if live else 0,
                pages_per_s=rate if live else 0.0,
            )
        ]

    async def beats(self) -> Sequence[Beat]:
        return ()

    async def proxies(self, crawl_id: str) -> list[ProxyState]:
        self._check(crawl_id)
        async with AsyncExitStack() as stack:
            states, _ = await open_proxy_stores(self._settings, stack)
            return await states.all()

    async def requeue_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        async with AsyncExitStack() as stack:
            frontier = await self._store(crawl_id, stack)
            chosen = None if prefixes is None else await resolve_fingerprints(frontier, prefixes)
            return await frontier.requeue_dead(chosen)

    async def purge_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        async with AsyncExitStack() as stack:
            frontier = await self._store(crawl_id, stack)
            chosen = None if prefixes is None else await resolve_fingerprints(frontier, prefixes)
            return await frontier.purge_dead(chosen)

    async def requeue_class(self, crawl_id: str, name: str) -> int:
        async with AsyncExitStack() as stack:
            return await requeue_class(await self._store(crawl_id, stack), name)

    async def purge_class(self, crawl_id: str, name: str) -> int:
        async with AsyncExitStack() as stack:
            return await purge_class(await self._store(crawl_id, stack), name)

    async def resume_parser(self, crawl_id: str, parser: str, domain: str) -> int:
        async with AsyncExitStack() as stack:
            return await resume(await self._store(crawl_id, stack), parser, domain)

    async def stored_quality(self, crawl_id: str) -> dict[str, Any] | None:
        return None

    def samples_root(self, crawl_id: str) -> Path | None:
        return self._settings.state_dir / SAMPLES if crawl_id == self.crawl_id else None

    async def _store(self, crawl_id: str, stack: AsyncExitStack) -> Frontier:
        await self.reader(crawl_id)
        if self.running():
            raise ActionRefused(
                "the crawl is running and holds its state file: requeue, purge or re-open a"
                " parser once it has stopped"
            )
        try:
            return await open_frontier(self._settings, stack)
        except StateError as exc:
            raise ActionRefused(f"cannot open the crawl's state now: {exc}") from None

    async def set_paused(self, crawl_id: str, paused: bool) -> None:
        self._check(crawl_id)
        try:
            await self._control.set_paused(paused)
        except OSError as exc:
            path = self._settings.state_dir / PAUSE_FILE
            raise StateError(f"cannot change {path}: {exc}") from None

    async def cancel(self, crawl_id: str) -> None:
        raise ConfigError(
            "cancel is for distributed crawls: give --redis URL --crawl-id ID (stop an embedded"
            " one with Ctrl-C)"
        )

    async def add_urls(
        self, crawl_id: str, urls: Sequence[str], *, clock: Clock | None = None
    ) -> Added:
        raise ConfigError("add is for distributed crawls: give --redis URL --crawl-id ID")

    def _check(self, crawl_id: str) -> None:
        """``StateError`` unless ``crawl_id`` is this directory's crawl and its state exists."""
        if crawl_id != self.crawl_id:
            raise StateError(f"no crawl {crawl_id!r} in {self._settings.state_dir}")
        if not self._state_file.exists():
            raise StateError(
                f"no crawl state in {self._settings.state_dir} (expected {self._state_file})"
            )

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
