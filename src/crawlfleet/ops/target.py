"""The crawl a ``Settings`` names, and its operations: the one place that picks the runtime.

``settings.redis_url`` set: the distributed crawl ``settings.crawl_id`` of that Redis (with
``settings.postgres_dsn`` for its attempts and items); else the embedded crawl of
``settings.state_dir``. The functions over ``Settings`` below open the operations for one
call and close them, for a caller that does one thing (a command, a test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from crawlfleet.runtime.control import RunState
from crawlfleet.settings import Settings

if TYPE_CHECKING:  # the implementations load when a command opens them, not with the CLI
    from crawlfleet.clock import Clock
    from crawlfleet.ops.protocols import Added, Operations


def operations(settings: Settings) -> tuple[Operations, str]:
    """The operations of the runtime ``settings`` name, and the id of the crawl they name
    (``ConfigError`` for a distributed one on an install without the distributed extra).
    Close them when done."""
    if settings.redis_url is None:
        from crawlfleet.ops.embedded import EmbeddedOperations

        embedded = EmbeddedOperations(settings)
        return embedded, embedded.crawl_id
    try:
        from crawlfleet.ops.distributed import DistributedOperations
    except ImportError as exc:
        from crawlfleet.runtime.backends import extra_missing

        raise extra_missing(exc) from None
    return DistributedOperations(settings.redis_url, settings.postgres_dsn), settings.crawl_id


@asynccontextmanager
async def open_operations(settings: Settings) -> AsyncIterator[tuple[Operations, str]]:
    """``operations``, closed on exit."""
    ops, crawl_id = operations(settings)
    try:
        yield ops, crawl_id
    finally:
        await ops.close()


async def run_state(settings: Settings) -> RunState:
    """What was asked of the crawl of ``settings`` (``StateError`` if there is none)."""
    async with open_operations(settings) as (ops, crawl_id):
        return await ops.asked(crawl_id)


async def is_paused(settings: Settings) -> bool:
    return await run_state(settings) is RunState.PAUSED


async def set_paused(settings: Settings, paused: bool) -> None:
    """Pause (or resume) the crawl of ``settings``.

    ``StateError`` when there is no such crawl, or it was cancelled (cancel is for good).
    """
    async with open_operations(settings) as (ops, crawl_id):
        await ops.set_paused(crawl_id, paused)


async def cancel(settings: Settings) -> None:
    """Stop a distributed crawl for good: its dispatcher exits, workers stop serving it.

    Its state stays in Redis (``status``, ``dlq``); ``ConfigError`` for an embedded crawl.
    """
    async with open_operations(settings) as (ops, crawl_id):
        await ops.cancel(crawl_id)


async def add_urls(settings: Settings, urls: Sequence[str], *, clock: Clock | None = None) -> Added:
    """Add seed URLs (depth 0) to the distributed crawl of ``settings``.

    ``ConfigError`` for an embedded target or a URL a distributed crawl cannot take
    (credentials, ``file:``); ``StateError`` when there is no such crawl or it was cancelled.
    """
    async with open_operations(settings) as (ops, crawl_id):
        return await ops.add_urls(crawl_id, urls, clock=clock)
