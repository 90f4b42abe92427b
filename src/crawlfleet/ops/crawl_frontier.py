"""A distributed crawl's frontier as the dashboard holds it: reopened when the crawl starts over.

The dashboard keeps each crawl's ``Frontier`` open across samples. ``crawl --fresh`` deletes
the crawl's keys and opens a new frontier (a new epoch), and the store then refuses every
call of the one opened before (``FrontierLost``). ``CrawlFrontier`` closes it, opens the
crawl again (with its new definition) and repeats the call once; a second ``FrontierLost``
is a real loss and goes to the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TypeVar

from crawlfleet.counters import CrawlStats
from crawlfleet.errors import FrontierLost
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.records import DeadLetter, QueueCounts

T = TypeVar("T")
Opener = Callable[[AsyncExitStack], Awaitable[Frontier]]


class CrawlFrontier:
    """The reads and dead-letter changes the dashboard makes, over a frontier ``open`` gives."""

    def __init__(self, frontier: Frontier, stack: AsyncExitStack, opener: Opener) -> None:
        self._frontier: Frontier | None = frontier
        self._stack = stack
        self._opener = opener

    @classmethod
    async def open(cls, opener: Opener) -> CrawlFrontier:
        stack = AsyncExitStack()
        try:
            frontier = await opener(stack)
        except BaseException:
            await stack.aclose()
            raise
        return cls(frontier, stack, opener)

    async def stats(self) -> CrawlStats:
        return await self._call(lambda f: f.stats())

    async def counts(self) -> QueueCounts:
        return await self._call(lambda f: f.counts())

    async def domains(self, limit: int = 100) -> list[DomainView]:
        return await self._call(lambda f: f.domains(limit))

    async def domain(self, domain: str) -> DomainView:
        return await self._call(lambda f: f.domain(domain))

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]:
        return await self._call(lambda f: f.dead_letters(limit, offset))

    async def requeue_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._call(lambda f: f.requeue_dead(fingerprints))

    async def purge_dead(self, fingerprints: Sequence[str] | None = None) -> int:
        return await self._call(lambda f: f.purge_dead(fingerprints))

    async def strategy(self, domain: str) -> dict[str, str]:
        return await self._call(lambda f: f.strategy(domain))

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None:
        await self._call(lambda f: f.set_strategy(domain, strategy))

    async def close(self) -> None:
        self._frontier = None
        await self._stack.aclose()

    async def _call(self, use: Callable[[Frontier], Awaitable[T]]) -> T:
        if self._frontier is not None:
            try:
                return await use(self._frontier)
            except FrontierLost:
                await self.close()
        self._stack = AsyncExitStack()
        try:
            self._frontier = await self._opener(self._stack)
        except BaseException:
            await self._stack.aclose()
            raise
        return await use(self._frontier)
