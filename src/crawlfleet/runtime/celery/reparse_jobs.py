"""A distributed reparse: one Celery task per WARC file, run by the workers.

``fan_out`` (the ``crawlfleet reparse --redis`` command) lists the archive's files, stores
the reparse's settings in Redis (``{p}:reparse:<job>:definition``, as a crawl definition:
without the Redis URL and the PostgreSQL DSN), publishes one ``crawlfleet.reparse_file`` task
per file and waits until every file has a result in ``{p}:reparse:<job>:files``
(``definition.py``'s key table). A worker (``reparse_file``) reparses its file into the
crawl's PostgreSQL item store with the usual pipeline and writes the file's figures, or the
error that stopped it, under the file's name. Tasks are idempotent: items are upserted by
key and a file's result is overwritten, so a task delivered twice (its worker died) changes
nothing. The command deletes both keys when every file is done; they expire after
``JOB_TTL_S`` otherwise (the command was stopped).

When no live worker serves the ``http`` queue (none sent a heartbeat, none consumes it, or
each refuses the crawl's parsers) for ``worker_wait_s`` while files are still waiting, the
command gives up with ``NoWorkers``, as the dispatcher does, and deletes the definition: a
worker that takes the tasks later finds none and does nothing.

``resume_reparsing_distributed`` (``resume-parser --parsers`` on a distributed crawl) parses a
drift's mismatched pages from the archive in the command itself.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.exceptions import RedisError

from crawlfleet.errors import CrawlfleetError, NoWorkers, StateError
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, connect
from crawlfleet.runtime.backends import open_store
from crawlfleet.runtime.celery.app import DEFAULT_QUEUE, REPARSE_TASK_NAME, check_broker, make_app
from crawlfleet.runtime.celery.crawls import no_worker_reason, read_definition, worker_beats
from crawlfleet.runtime.celery.definition import (
    CrawlDefinition,
    check_parsers,
    reparse_definition_key,
    reparse_files_key,
)
from crawlfleet.runtime.celery.worker_config import WorkerConfig
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.reparse import (
    ReparsedResume,
    ReparseFigures,
    ReparseTarget,
    reparse_mismatched,
    reparse_to_postgres,
)
from crawlfleet.settings import Settings

log = logging.getLogger(__name__)

JOB_TTL_S = 7 * 86400
"""How long a reparse's keys outlive a command that stopped before the end."""
POLL_S = 0.2


@dataclass(slots=True)
class FannedOut:
    """A distributed reparse's outcome: the summed figures (``elapsed_s``: the wall time of
    the whole), how many files, and those that failed (name -> error)."""

    figures: ReparseFigures
    files: int
    failed: dict[str, str] = field(default_factory=dict)


async def fan_out(
    settings: Settings,
    source: str,
    *,
    redis_url: str,
    broker_url: str,
    on_progress: Callable[[int, int], None] | None = None,
) -> FannedOut:
    """Publish one task per WARC file of ``source`` (``s3://...``, or a directory every
    worker sees at that absolute path) and wait for every file's result.

    ``on_progress(done, files)`` is called each time more files are done.
    """
    from crawlfleet.archive.reading import archive_file_names  # fastwarc: the archive extra

    names = await asyncio.to_thread(archive_file_names, source)
    await asyncio.to_thread(check_broker, broker_url)
    crawl_id, job = settings.crawl_id, uuid.uuid4().hex[:12]
    definition_key = reparse_definition_key(crawl_id, job)
    files_key = reparse_files_key(crawl_id, job)
    client = connect(redis_url, socket_connect_timeout=5)
    started = time.perf_counter()
    try:
        try:
            await client.set(definition_key, CrawlDefinition(settings, ()).to_json(), ex=JOB_TTL_S)
        except RedisError as exc:
            raise StateError(f"Redis at {redact(redis_url)}: {exc}") from None
        await asyncio.to_thread(_publish, broker_url, crawl_id, job, source, names)
        try:
            results = await _wait(
                client, files_key, len(names), on_progress, _Watch(crawl_id, settings)
            )
        except NoWorkers:
            await client.delete(definition_key)  # the tasks left queued: void
            raise
        await client.delete(definition_key, files_key)
    finally:
        await client.aclose()
    outcome = FannedOut(ReparseFigures(), len(names))
    for name, raw in sorted(results.items()):
        data: dict[str, Any] = orjson.loads(raw)
        if "error" in data:
            outcome.failed[name] = str(data["error"])
        else:
            outcome.figures.add(ReparseFigures.from_dict(data))
    outcome.figures.elapsed_s = time.perf_counter() - started
    return outcome


def _publish(broker_url: str, crawl_id: str, job: str, source: str, names: list[str]) -> None:
    app = make_app(broker_url)
    queue = app.amqp.queues[DEFAULT_QUEUE]
    with app.producer_or_acquire() as producer:
        for name in names:
            app.send_task(
                REPARSE_TASK_NAME,
                args=[crawl_id, job, source, name],
                queue=queue,
                producer=producer,
            )


@dataclass(slots=True)
class _Watch:
    """``NoWorkers`` once no live worker has served the ``http`` queue for the crawl for
    ``worker_wait_s`` (0: never) with no file done meanwhile."""

    crawl_id: str
    settings: Settings
    served_at: float = field(default_factory=time.monotonic)

    async def check(self, client: RedisClient, progressed: bool) -> None:
        wait_s = self.settings.worker_wait_s
        if wait_s == 0:
            return
        beats = await worker_beats(client)
        why = no_worker_reason(beats, self.crawl_id, [DEFAULT_QUEUE], time.time())
        if why is None or progressed:
            self.served_at = time.monotonic()
        elif time.monotonic() - self.served_at >= wait_s:
            raise NoWorkers(
                f"no live worker has taken the reparse's tasks for {wait_s:g} s ({why}); "
                "start one (crawlfleet worker --redis URL --postgres DSN --parsers ...), then "
                "run the same command again (--wait-for-workers waits for ever)"
            )


async def _wait(
    client: RedisClient,
    files_key: str,
    files: int,
    on_progress: Callable[[int, int], None] | None,
    watch: _Watch,
) -> dict[str, str]:
    done = -1
    while True:
        try:
            now = int(await client.hlen(files_key))
            if now >= files:
                results = await client.hgetall(files_key)
                return {_text(name): _text(raw) for name, raw in results.items()}
            await watch.check(client, progressed=now != done)
        except RedisError as exc:
            raise StateError(f"Redis: {exc}") from None
        if now != done and on_progress is not None:
            on_progress(now, files)
        done = now
        await asyncio.sleep(POLL_S)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def reparse_file(
    config: WorkerConfig, client: RedisClient, crawl_id: str, job: str, source: str, name: str
) -> dict[str, Any]:
    """Reparse one WARC file of job ``job`` into the crawl's PostgreSQL items (a worker's
    task); the figures, or ``{"error": ...}``, also written under the file's name."""
    try:
        raw = await client.get(reparse_definition_key(crawl_id, job))
        if raw is None:
            raise StateError(f"reparse {job} of crawl {crawl_id!r} has no definition (expired?)")
        definition = CrawlDefinition.from_json(raw)
        check_parsers(definition, config.parsers)  # Redis access is not code execution
        from crawlfleet.archive.reading import file_records  # fastwarc: the archive extra

        figures = await reparse_to_postgres(
            definition.settings, file_records(source, name), config.postgres_dsn
        )
        result: dict[str, Any] = figures.to_dict()
    except (CrawlfleetError, OSError, ImportError) as exc:
        log.warning("reparse %s of crawl %s: %s: %s", job, crawl_id, name, exc)
        result = {"error": " ".join(str(exc).split()) or type(exc).__name__}
    except RedisError as exc:
        raise StateError(f"Redis: {exc}") from None  # the result cannot be written either
    files_key = reparse_files_key(crawl_id, job)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hset(files_key, name, orjson.dumps(result))
        pipe.expire(files_key, JOB_TTL_S)
        await pipe.execute()
    return result


async def resume_reparsing_distributed(
    settings: Settings, dsn: str, parser: str, domain: str
) -> ReparsedResume:
    """``reparse_mismatched`` for the distributed crawl ``settings.crawl_id`` of the Redis at
    ``settings.redis_url``: the settings of its definition with ``settings``' (fixed)
    parsers, its items and capture index in the PostgreSQL at ``dsn``. Run by the command,
    not the workers (a drift's pages are few). ``StateError`` when there is no such crawl."""
    from crawlfleet.archive.postgres_index import PostgresCaptureIndex
    from crawlfleet.pipeline.sinks.postgres import PostgresRejects, PostgresSink

    redis_url = settings.redis_url or ""
    async with AsyncExitStack() as stack:
        client = connect(redis_url)
        stack.push_async_callback(client.aclose)
        try:
            definition = await read_definition(client, settings.crawl_id)
        except RedisError as exc:
            raise StateError(f"Redis at {redact(redis_url)}: {exc}") from None
        if definition is None:
            raise StateError(f"no crawl {settings.crawl_id!r} in Redis at {redact(redis_url)}")
        own = definition.settings.model_copy(
            update={"redis_url": redis_url, "parsers": list(settings.parsers)}
        )
        store = (await open_store(own, stack, domain_policy(own))).store
        sink = await PostgresSink.open(dsn, crawl_id=own.crawl_id)
        stack.push_async_callback(sink.close)
        rejects = await PostgresRejects.open(dsn, crawl_id=own.crawl_id)
        stack.push_async_callback(rejects.close)
        index = PostgresCaptureIndex(dsn, own.crawl_id)
        stack.callback(index.close)
        target = ReparseTarget(own, list(definition.seeds), store, sink, rejects, index)
        return await reparse_mismatched(target, parser, domain, stack)
