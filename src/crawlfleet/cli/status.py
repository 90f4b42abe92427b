"""``crawlfleet status``: the distributed crawls in a Redis, their frontier counts, the workers."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from crawlfleet.cli.console import fail, safe
from crawlfleet.errors import CrawlfleetError
from crawlfleet.settings import check_redis_url

out = Console()
err = Console(stderr=True)


async def _status(redis_url: str, crawl_id: str | None) -> None:
    from redis.exceptions import RedisError

    from crawlfleet.errors import StateError
    from crawlfleet.redact import redact
    from crawlfleet.runtime.celery.crawls import (
        WORKER_SEEN_S,
        connect,
        list_crawls,
        one_line,
        open_crawl_store,
        worker_beats,
    )

    client = connect(redis_url)
    try:
        ids, active = await list_crawls(client)
        beats = await worker_beats(client)
    except RedisError as exc:
        raise StateError(one_line(f"Redis at {redact(redis_url)}: {exc}")) from None
    finally:
        await client.aclose()
    if crawl_id is not None:
        if crawl_id not in ids:
            raise StateError(f"no crawl {crawl_id!r} in Redis at {redact(redis_url)}")
        ids = [crawl_id]
    crawls = Table(title="crawls")
    for column in ("crawl", "state", "queued", "leased", "done", "dead (DLQ)", "seen"):
        crawls.add_column(column, justify="left" if column in ("crawl", "state") else "right")
    for name in ids:
        store = await open_crawl_store(redis_url, name)
        try:
            c = await store.counts()
        finally:
            await store.close()
        state = "dispatching" if name in active else ("finished" if not c.pending else "stopped")
        counts = (str(n) for n in (c.queued, c.leased, c.done, c.dead, c.seen))
        crawls.add_row(safe(name), state, *counts)
    out.print(crawls)
    now = time.time()
    workers = Table(title=f"workers (live: heartbeat within {WORKER_SEEN_S:.0f} s)")
    for column in ("worker", "live", "last seen", "crawl", "concurrency", "queues"):
        workers.add_column(column)
    for beat in beats:
        ago_s = now - beat.seen_at
        live = "yes" if ago_s < WORKER_SEEN_S else "no"
        workers.add_row(
            safe(beat.name), live, f"{ago_s:.0f} s ago", safe(beat.crawl),
            str(beat.concurrency), safe(",".join(beat.queues)),
        )  # fmt: skip
    out.print(workers)


def status(
    redis: Annotated[str, typer.Option("--redis", help="Redis URL of the crawls' frontier")],
    crawl_id: Annotated[str | None, typer.Option(help="show only this crawl")] = None,
) -> None:
    """Counts per state and DLQ size of each distributed crawl, and the workers seen."""
    try:
        asyncio.run(_status(check_redis_url(redis), crawl_id))
    except CrawlfleetError as exc:
        fail(exc, err)


def register(app: typer.Typer) -> None:
    app.command()(status)
