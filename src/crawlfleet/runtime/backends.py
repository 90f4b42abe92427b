"""The one module that opens the storage of a crawl: queue store, item sink, rejects, attempt log.

Which process opens what:

================  ===========================  ==========================  ===================
process           queue store                  items (sink, rejects)       attempt log
================  ===========================  ==========================  ===================
embedded crawl    SQLite ``state.sqlite``      SQLite ``items.sqlite``     read from the state
                                                                           file (the store
                                                                           writes it)
dispatcher        Redis                        none                        PostgreSQL (copies
                                                                           the store's pending
                                                                           attempts, reads)
worker            Redis                        PostgreSQL (serialized)     none: attempts go to
                                                                           the store
operations        SQLite read-only (the store  read-only: SQLite or        read-only: the state
(``ops/``:        for requeue and purge, once  PostgreSQL                  file or PostgreSQL
status, dlq,      the crawl has stopped), or
dashboard)        Redis (each crawl)
================  ===========================  ==========================  ===================

It is also where a run decides embedded or distributed for what it opens beside: proxy
states, crawl and login sessions, the archive's capture index, and which fetcher kinds its
runners serve (``served_kinds``). ``ops/target.py`` is the same choice for operating a crawl.

``redis``, ``celery`` and ``psycopg`` are imported inside the functions that need them, so
the embedded runtime runs without them. Every failure to open is a one-line ``StateError``
(passwords redacted) or ``ConfigError``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.archive.protocols import CaptureIndex
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.store_types import DomainPolicy
from crawlfleet.monitoring.attempt_log import AttemptLog, AttemptReader
from crawlfleet.monitoring.quality_copier import QualityWriter
from crawlfleet.pipeline.export import ITEMS_FILE
from crawlfleet.pipeline.protocols import Sink
from crawlfleet.pipeline.rejects import RejectStore
from crawlfleet.proxies.protocols import ProxyStateStore
from crawlfleet.redact import redact
from crawlfleet.sessions.protocols import CrawlSessionStore, SessionStore
from crawlfleet.settings import Settings

if TYPE_CHECKING:
    from crawlfleet.monitoring.postgres_reader import PostgresReader

log = logging.getLogger(__name__)

STATE_FILE = "state.sqlite"
"""The queue store and attempt log of an embedded crawl, inside its state directory."""

ARCHIVE_SPOOL = "archive-spool"
"""Where WARC files for an ``s3://`` archive wait to be uploaded, inside the state directory."""


def frontier_prefix(crawl_id: str) -> str:
    """The Redis key prefix of a crawl's own slot: ``crawlfleet:{<crawl_id>}`` (hash-tagged):
    its whole frontier, or with several partitions its crawl-wide keys
    (``frontier/redis/routing.py``)."""
    return f"crawlfleet:{{{crawl_id}}}"


def partition_pattern(crawl_id: str) -> str:
    """A SCAN ``MATCH`` pattern for every key of a partitioned crawl's partitions."""
    return f"crawlfleet:{{{crawl_id}:*"


def state_paths(state_dir: Path) -> tuple[Path, Path]:
    """The queue/attempt-log file and the items file of an embedded crawl."""
    return state_dir / STATE_FILE, state_dir / ITEMS_FILE


@dataclass(frozen=True, slots=True)
class Backends:
    """The open storage of one crawl process; the ``AsyncExitStack`` given at opening closes it.

    ``sink`` and ``rejects`` are None where the process writes no items (dispatcher,
    readers); ``attempts`` is None where the process reads no attempt log (workers,
    readers); ``attempt_log`` is the external log the dispatcher copies the store's pending
    attempts to (the same object as ``attempts`` there), ``quality`` where it writes the
    quality scores. ``items_file`` is the embedded crawl's items file (exports read it).
    """

    store: QueueStore
    sink: Sink | None = None
    rejects: RejectStore | None = None
    attempts: AttemptReader | None = None
    attempt_log: AttemptLog | None = None
    items_file: Path | None = None
    quality: QualityWriter | None = None


def runs_distributed(settings: Settings) -> bool:
    """Whether ``settings`` describe a distributed crawl (``redis_url`` or ``postgres_dsn``
    set: this process is its dispatcher, and needs both) rather than an embedded one."""
    return settings.redis_url is not None or settings.postgres_dsn is not None


def served_kinds(settings: Settings) -> tuple[str, ...]:
    """The fetcher kinds the crawl's runners serve: embedded, those this machine can run;
    distributed, those a worker of this build serves."""
    from crawlfleet.runtime.choice.kinds import WORKER_KINDS, servable_kinds

    if settings.redis_url is None:
        return servable_kinds(settings.browser_executable)
    return WORKER_KINDS


def extra_missing(exc: ImportError) -> ConfigError:
    """The one-line error for a distributed command on an install without the extra."""
    return ConfigError(
        f"distributed mode needs crawlfleet installed with its distributed extra ({exc})"
    )


def one_line(text: str) -> str:
    return " ".join(text.split())


async def open_embedded(
    settings: Settings,
    stack: AsyncExitStack,
    *,
    policy: DomainPolicy,
    seeds: Sequence[str],
    fresh: bool,
) -> Backends:
    """The SQLite queue store (holding ``policy``, the crawl's default domain policy), items
    sink (also the rejects store) and attempt-log reader.

    The state directory is taken first (``statedir.StateDir``: its lock, the crawl's
    identity, and with ``fresh`` the deletion of the crawler's own files, nothing else).
    """
    from crawlfleet.frontier.sqlite import SqliteQueueStore
    from crawlfleet.monitoring.attempt_log import SqliteAttemptLog
    from crawlfleet.pipeline.sinks.sqlite import SqliteSink
    from crawlfleet.statedir import StateDir, crawl_identity, politeness

    values = dict(settings)
    identity = crawl_identity(values, seeds)
    held = StateDir.open(settings.state_dir, identity, fresh=fresh, politeness=politeness(values))
    stack.callback(held.release)
    state_file, items_file = state_paths(settings.state_dir)
    store = await SqliteQueueStore.open(
        state_file, policy=policy, keep_attempts=settings.attempt_log_max_rows
    )
    stack.push_async_callback(store.close)
    attempts = await SqliteAttemptLog.open(state_file, settle=store.commit_now)
    stack.push_async_callback(attempts.close)
    sink = await SqliteSink.open(items_file, crawl_id=settings.crawl_id)
    stack.push_async_callback(sink.close)
    store.commit_after(sink.write_in_turns())  # decision 0027
    return Backends(store, sink=sink, rejects=sink, attempts=attempts, items_file=items_file)


async def open_distributed(
    settings: Settings, stack: AsyncExitStack, *, policy: DomainPolicy, worker: bool
) -> Backends:
    """The Redis store (holding ``policy``), and for a ``worker`` the PostgreSQL sink, else
    the attempt log.

    Runs the PostgreSQL migrations first, so either process may be the first to touch a
    fresh database. The dispatcher (``worker=False``) builds no sink: it writes no item.
    """
    from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
    from crawlfleet.monitoring.postgres_quality import PostgresQualityScores
    from crawlfleet.pipeline.sinks.postgres import PostgresRejects, PostgresSink
    from crawlfleet.pipeline.sinks.postgres_schema import migrate

    dsn = _dsn(settings)
    if not worker:  # a worker checked the same Redis when it started (check_backends)
        await check_redis(settings.redis_url or "", accept_unsafe=settings.accept_unsafe_redis)
    store = await _redis_store(settings, stack, policy)
    try:
        await asyncio.to_thread(migrate, dsn)
        if worker:
            sink = await PostgresSink.open(dsn, crawl_id=settings.crawl_id)
            stack.push_async_callback(sink.close)
            rejects = await PostgresRejects.open(dsn, crawl_id=settings.crawl_id)
            stack.push_async_callback(rejects.close)
            return Backends(store, sink=sink, rejects=rejects)
        attempts = await PostgresAttemptLog.open(dsn, crawl_id=settings.crawl_id)
        stack.push_async_callback(attempts.close)
        quality = await PostgresQualityScores.open(dsn, crawl_id=settings.crawl_id)
        stack.push_async_callback(quality.close)
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None
    return Backends(store, attempts=attempts, attempt_log=attempts, quality=quality)


async def open_store(settings: Settings, stack: AsyncExitStack, policy: DomainPolicy) -> Backends:
    """The store of an existing crawl, holding ``policy``, for reading and DLQ operations.

    Redis when ``settings.redis_url`` is set (the settings of the crawl's definition, for
    its dedup options), else the SQLite state file: ``StateError`` if there is none.
    """
    if settings.redis_url is not None:
        return Backends(await _redis_store(settings, stack, policy))
    from crawlfleet.frontier.sqlite import SqliteQueueStore

    state_file, _ = state_paths(settings.state_dir)
    if not state_file.exists():
        raise StateError(f"no crawl state in {settings.state_dir} (expected {state_file})")
    store = await SqliteQueueStore.open(state_file, policy=policy)
    stack.push_async_callback(store.close)
    return Backends(store)


async def open_postgres_reader(dsn: str, stack: AsyncExitStack) -> PostgresReader:
    """The dashboard's read-only PostgreSQL connection (attempts and items of every crawl).

    No migration: the dashboard writes nothing; a database no worker migrated reads empty.
    """
    from crawlfleet.monitoring.postgres_reader import PostgresReader

    try:
        reader = await PostgresReader.open(dsn)
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None
    stack.push_async_callback(reader.close)
    return reader


async def check_redis(redis_url: str, *, accept_unsafe: bool) -> None:
    """``StateError`` (one line) for a Redis that can lose or evict a crawl, or is open to
    anyone; what could not be checked, or was accepted, is logged as a warning. On a Redis
    Cluster every node (primaries and replicas) is checked: a replica promoted by a failover
    must keep the crawl as well as its primary did."""
    from redis.asyncio import Redis
    from redis.exceptions import RedisError

    from crawlfleet.frontier.redis.safety import check_redis_safety
    from crawlfleet.redisdb import connect, node_clients

    try:
        client = connect(redis_url, socket_connect_timeout=5)
    except ValueError as exc:
        raise StateError(f"bad Redis URL {redact(redis_url)}: {exc}") from None
    try:
        try:
            nodes = [client] if isinstance(client, Redis) else await node_clients(client)
        except RedisError as exc:
            raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
        try:
            for node in nodes:
                for warning in await check_redis_safety(node, accept_unsafe=accept_unsafe):
                    log.warning("%s", warning)
        finally:
            for node in nodes:
                if node is not client:
                    await node.aclose()
    finally:
        await client.aclose()


def _dsn(settings: Settings) -> str:
    if settings.redis_url is None or settings.postgres_dsn is None:
        raise ConfigError("a distributed crawl needs both --redis and --postgres")
    return settings.postgres_dsn


async def _redis_store(
    settings: Settings, stack: AsyncExitStack, policy: DomainPolicy
) -> QueueStore:
    from crawlfleet.frontier.redis.crawl_store import open_crawl_store

    if settings.redis_url is None:
        raise ConfigError("no Redis URL given (--redis)")
    try:
        store = await open_crawl_store(
            settings.redis_url,
            settings.crawl_id,
            policy=policy,
            partitions=settings.frontier_partitions,
            dedup=settings.dedup,
            bloom_capacity=settings.bloom_capacity,
            bloom_error_rate=settings.bloom_error_rate,
        )
    except StateError as exc:
        raise StateError(one_line(str(exc))) from None
    stack.push_async_callback(store.close)
    return store


async def open_proxy_stores(
    settings: Settings, stack: AsyncExitStack
) -> tuple[ProxyStateStore, CrawlSessionStore]:
    """The crawl's proxy states and crawl sessions: Redis when distributed, else ``state.sqlite``."""
    if settings.redis_url is not None:
        from crawlfleet.proxies.redis import RedisProxyStates
        from crawlfleet.sessions.redis import RedisSessionStore

        prefix = frontier_prefix(settings.crawl_id)
        redis_states = RedisProxyStates.open(settings.redis_url, prefix)
        stack.push_async_callback(redis_states.close)
        redis_sessions = RedisSessionStore.open(settings.redis_url, prefix)
        stack.push_async_callback(redis_sessions.close)
        return redis_states, redis_sessions
    from crawlfleet.proxies.sqlite import SqliteProxyStates
    from crawlfleet.sessions.sqlite import SqliteSessionStore

    path = state_paths(settings.state_dir)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    sqlite_states = await SqliteProxyStates.open(path)
    stack.push_async_callback(sqlite_states.close)
    sqlite_sessions = await SqliteSessionStore.open(path)
    stack.push_async_callback(sqlite_sessions.close)
    return sqlite_states, sqlite_sessions


async def open_session_store(settings: Settings, stack: AsyncExitStack) -> SessionStore:
    """The crawl's login sessions (``runtime/fetching/login.py``): Redis when distributed, else the
    state file's table."""
    if settings.redis_url is not None:
        from crawlfleet.sessions.redis import RedisSessionStore

        redis_store = RedisSessionStore.open(settings.redis_url, frontier_prefix(settings.crawl_id))
        stack.push_async_callback(redis_store.close)
        return redis_store
    from crawlfleet.sessions.sqlite import SqliteSessionStore

    sqlite_store = await SqliteSessionStore.open(state_paths(settings.state_dir)[0])
    stack.push_async_callback(sqlite_store.close)
    return sqlite_store


def open_capture_index(settings: Settings) -> CaptureIndex:
    """The crawl's archive index (``runtime/archiving.py``): SQLite in its state directory,
    or PostgreSQL with ``redis_url`` (``ConfigError`` without ``postgres_dsn``)."""
    if settings.redis_url is None:
        return SqliteCaptureIndex(settings.state_dir / INDEX_FILE)
    if settings.postgres_dsn is None:
        raise ConfigError("a distributed crawl's archive index needs --postgres DSN")
    from crawlfleet.archive.postgres_index import PostgresCaptureIndex  # psycopg

    return PostgresCaptureIndex(settings.postgres_dsn, settings.crawl_id)


@dataclass(frozen=True, slots=True)
class ArchiveLayout:
    """How this process writes its crawl's archive (``runtime/archiving.py``).

    ``spool``: where WARC files for an ``s3://`` target wait until uploaded. ``per_process``:
    the spool is this process's own (``<host>-<pid>``, a worker), beside those of the host's
    other workers, whose files it uploads once their process is gone; else it is the
    crawl's only spool. ``row_at_a_time``: each capture's index row is written (in a thread)
    as its record is, since a worker's loop stops between tasks and a row must be written
    before its page's lease ends; else rows are written in batches.
    """

    spool: Path
    per_process: bool
    row_at_a_time: bool


def archive_layout(settings: Settings) -> ArchiveLayout:
    """The embedded crawl's one spool and batched rows, or a distributed worker's own spool
    and rows written one at a time."""
    base = settings.state_dir / ARCHIVE_SPOOL
    if settings.redis_url is None:
        return ArchiveLayout(base, per_process=False, row_at_a_time=False)
    own = base / f"{socket.gethostname()}-{os.getpid()}"
    return ArchiveLayout(own, per_process=True, row_at_a_time=True)
