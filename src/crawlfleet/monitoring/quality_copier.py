"""Copies a crawl's quality scores from its store's counters to where they outlast it.

The dispatcher of a distributed crawl holds one: at most every ``every_s`` while the crawl
runs, and once when it ends (``force``), it reads the crawl's counters and those of its
``domains`` most admitted domains and hands them to a ``QualityWriter`` (PostgreSQL:
``monitoring/postgres_quality.py``), which replaces what it had.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.store_types import DomainView


class QualitySource(Protocol):
    """The crawl's counters, in total and per domain (``Frontier``)."""

    async def stats(self) -> CrawlStats: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...


class QualityWriter(Protocol):
    """Where the scores go; ``StateError`` when they could not be written."""

    async def write(self, total: CrawlStats, domains: Mapping[str, CrawlStats]) -> None: ...


class QualityCopier:
    """Writes ``source``'s quality scores to ``writer`` at most every ``every_s``."""

    def __init__(
        self, source: QualitySource, writer: QualityWriter, *, every_s: float, domains: int
    ) -> None:
        self._source = source
        self._writer = writer
        self._every_s = every_s
        self._domains = domains
        self._written_at: float | None = None

    async def copy(self, now: float, *, force: bool = False) -> bool:
        """Write the scores if ``every_s`` passed since the last write (or ``force``);
        whether they were written. ``StateError`` from the writer: tried again next call."""
        if not force and self._written_at is not None and now - self._written_at < self._every_s:
            return False
        total = await self._source.stats()
        views = await self._source.domains(self._domains)
        await self._writer.write(total, {view.domain: view.stats for view in views})
        self._written_at = now
        return True
