"""Page URLs from sitemaps: one sitemap's body read, and a standalone reader of many.

A crawl reads its sitemaps as requests of its frontier (decision 0052): a sitemap request
carries ``{SITEMAP_KEY: depth}`` in its ``data``, is claimed, paced and retried like a page,
and its body is read by ``read_sitemap`` (``runtime/admission.py`` admits what it lists).
``sitemap_entries`` reads sitemaps one after another on its own, with the same rules.

A sitemap is fetched like a page: only when the crawl's scope takes its URL (an index may list
sitemaps on any host), when robots.txt allows it, and no sooner than the host's delay (or its
Crawl-delay) after the last sitemap fetched from that host. Its body is read by
``sitemap_format`` (XML urlsets, sitemap indexes, RSS and Atom feeds, gzip, plain text). A
sitemap that cannot be fetched or is too large is skipped with a logged reason; broken XML is
read past, its broken entries skipped and counted (a warning line a sitemap, and
``SitemapTally`` for the caller); the other sitemaps are read on.

``sitemap_entries`` also gives each page's ``<lastmod>`` (W3C datetime, as epoch seconds;
None when absent or unreadable), which moves a known URL up (``Frontier.expedite``).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.counters import Limit
from crawlfleet.errors import BadUrl, FetchError
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of
from crawlfleet.frontier.sitemap_format import BadSitemap, SitemapEntry, SitemapReader, inflate
from crawlfleet.frontier.store_types import DEFAULT_MAX_CRAWL_DELAY_S

__all__ = [
    "DEFAULT_SITEMAP_LIMITS",
    "SITEMAP_KEY",
    "SitemapEntry",
    "SitemapLimits",
    "SitemapTally",
    "default_sitemaps",
    "read_sitemap",
    "sitemap_depth",
    "sitemap_entries",
    "sitemap_fingerprint",
]

logger = logging.getLogger(__name__)

SITEMAP_KEY = "sitemap"
"""The key, in a sitemap request's ``data``, of its depth below the sitemaps the crawl started
from (0 for robots.txt's ``Sitemap:`` lines and /sitemap.xml)."""


@dataclass(slots=True)
class SitemapTally:
    """What reading sitemaps gave and left, for the caller to count and show."""

    entries: int = 0  # page URLs handed out
    broken_entries: int = 0  # entries without a usable URL (or needing an entity), skipped
    xml_faults: int = 0  # XML errors read past
    sitemaps_read: int = 0
    sitemaps_skipped: int = 0  # not fetched, refused, too large, undecompressable
    sitemaps_over_limits: int = 0  # listed by an index past max_depth or max_sitemaps
    sitemaps_queued: int = 0  # child sitemaps listed by an index, to be read

    def counters(self) -> dict[str, float]:
        """The tally as crawl statistics (``sitemaps.<name>``), the zeros left out."""
        names = {
            "read": self.sitemaps_read,
            "entries": self.entries,
            "queued": self.sitemaps_queued,
            "over_limits": self.sitemaps_over_limits,
            "skipped": self.sitemaps_skipped,
            "broken_entries": self.broken_entries,
            "xml_faults": self.xml_faults,
        }
        return {f"sitemaps.{name}": float(n) for name, n in names.items() if n}


@dataclass(frozen=True, slots=True)
class SitemapLimits:
    """What one seed's sitemaps may cost (the ``sitemap_max_*`` settings): URLs in all, index
    levels followed, sitemaps read, bytes of one sitemap (before and after gzip)."""

    max_urls: int = 1_000_000
    max_depth: int = 3
    max_sitemaps: int = 10_000
    max_bytes: int = 50 * 1024 * 1024


DEFAULT_SITEMAP_LIMITS = SitemapLimits()


def sitemap_depth(data: Mapping[str, Any]) -> int | None:
    """The depth of a sitemap request (from its ``data``); None for any other request."""
    depth = data.get(SITEMAP_KEY)
    return depth if isinstance(depth, int) else None


def sitemap_fingerprint(page_fingerprint: str) -> str:
    """The fingerprint of the sitemap request of a URL, apart from its page's: a URL read as
    a sitemap is still fetched as a page when a page links to it."""
    return hashlib.sha1(f"sitemap {page_fingerprint}".encode()).hexdigest()[:32]


def read_sitemap(
    url: str, body: bytes, tally: SitemapTally, max_bytes: int = DEFAULT_SITEMAP_LIMITS.max_bytes
) -> Generator[tuple[list[SitemapEntry], list[str]]]:
    """The page entries and the child sitemap URLs of one sitemap body, a chunk at a time.

    Raises ``BadSitemap`` when the body cannot be inflated (what came before it was handed
    out). Its broken entries and XML faults are counted in ``tally`` and told in one warning
    line when the reading ends (close the iterator when leaving it early).
    """
    reader = SitemapReader()
    try:
        for chunk in itertools.chain(inflate(body, max_bytes), [None]):
            reader.feed(chunk)
            yield reader.take_pages(), reader.take_sitemaps()
    finally:
        _report(url, reader, tally)


class _Skip(Exception):
    """This sitemap is skipped; the message says why."""


class _TooLarge(_Skip):
    """This sitemap's body is over the byte limit."""


async def default_sitemaps(robots: RobotsCache, seed_url: str) -> list[str]:
    """The sitemaps to read for a seed's origin: robots.txt ``Sitemap:`` lines, /sitemap.xml.

    /sitemap.xml is left out when robots.txt disallows it.
    """
    listed = await robots.sitemaps(seed_url)
    fallback = f"{origin_of(seed_url)}/sitemap.xml"
    if fallback not in listed and (await robots.check(fallback)).allowed:
        listed.append(fallback)
    return listed


async def sitemap_entries(
    fetch: FetchFn,
    start: Sequence[str],
    *,
    in_scope: Callable[[str], bool] | None = None,
    robots: RobotsCache | None = None,
    delay_s: float = 0.0,
    max_crawl_delay_s: float = DEFAULT_MAX_CRAWL_DELAY_S,
    clock: Clock | None = None,
    limits: SitemapLimits = DEFAULT_SITEMAP_LIMITS,
    dropped: Counter[Limit] | None = None,
    tally: SitemapTally | None = None,
) -> AsyncIterator[SitemapEntry]:
    """The page URLs of the ``start`` sitemaps and of the sitemaps their indexes list.

    A sitemap is fetched only if ``in_scope`` takes its URL and ``robots`` allows it, at
    least ``delay_s`` (or the host's Crawl-delay, at most ``max_crawl_delay_s``) after the
    previous sitemap fetch from its host ended; a refused one is skipped with a logged
    reason. Indexes are followed ``limits.max_depth`` levels down; each sitemap is fetched
    once, at most ``limits.max_sitemaps`` in all. ``limits.max_bytes`` caps each body, before
    and after gzip. Stops after ``limits.max_urls`` URLs. URLs are absolute, in sitemap
    order, not deduplicated. ``dropped`` counts the sitemaps each limit left unread (or read
    in part); ``tally``, when given, is counted up as the sitemaps are read.
    """
    tally = tally if tally is not None else SitemapTally()
    max_urls, max_depth = limits.max_urls, limits.max_depth
    max_bytes, max_sitemaps = limits.max_bytes, limits.max_sitemaps
    drops: Counter[Limit] = Counter() if dropped is None else dropped
    gate = _Gate(in_scope, robots, delay_s, max_crawl_delay_s, clock or SystemClock())
    queue = deque((url, 0) for url in dict.fromkeys(start))
    seen = set(start)
    count = 0
    while queue:
        url, depth = queue.popleft()
        reader = SitemapReader()
        try:
            await gate.enter(url)
            try:
                body = await _fetch_body(fetch, url, max_bytes)
            finally:
                gate.leave(url)
            tally.sitemaps_read += 1
            for chunk in itertools.chain(inflate(body, max_bytes), [None]):
                reader.feed(chunk)
                for page in reader.take_pages():
                    if count >= max_urls:  # this sitemap read in part, the queued ones not
                        drops[Limit.SITEMAP_MAX_URLS] += 1 + len(queue)
                        logger.warning("sitemaps: stopped at %d URLs (max_urls)", max_urls)
                        return
                    yield page
                    count += 1
                    tally.entries += 1
                for child in reader.take_sitemaps():
                    if child in seen:
                        continue
                    if depth >= max_depth:
                        drops[Limit.SITEMAP_MAX_DEPTH] += 1
                        tally.sitemaps_over_limits += 1
                    elif len(seen) >= max_sitemaps:
                        drops[Limit.SITEMAP_MAX_SITEMAPS] += 1
                        tally.sitemaps_over_limits += 1
                    else:
                        queue.append((child, depth + 1))
                    seen.add(child)
                await asyncio.sleep(0)  # a 50 MB sitemap must not stall the event loop
        except _TooLarge as exc:
            drops[Limit.SITEMAP_MAX_BYTES] += 1
            logger.warning("skipping sitemap %s: %s", url, exc)
        except (_Skip, BadSitemap) as exc:
            tally.sitemaps_skipped += 1
            logger.warning("skipping sitemap %s: %s", url, exc)
        finally:
            _report(url, reader, tally)


def _report(url: str, reader: SitemapReader, tally: SitemapTally) -> None:
    """Count a sitemap's broken entries and faults; one warning line when there are any."""
    tally.broken_entries += reader.broken
    tally.xml_faults += reader.faults
    if reader.broken or reader.faults:
        logger.warning(
            "sitemap %s: %d broken entries skipped, %d XML faults read past",
            url,
            reader.broken,
            reader.faults,
        )


class _Gate:
    """Scope, robots.txt and per-host pacing for sitemap fetches."""

    def __init__(
        self,
        in_scope: Callable[[str], bool] | None,
        robots: RobotsCache | None,
        delay_s: float,
        max_crawl_delay_s: float,
        clock: Clock,
    ) -> None:
        self._in_scope = in_scope
        self._robots = robots
        self._delay_s = delay_s
        self._max_crawl_delay_s = max_crawl_delay_s
        self._clock = clock
        self._last_end: dict[str, float] = {}

    async def enter(self, url: str) -> None:
        """Return when ``url`` may be fetched; ``_Skip`` if it may not be at all."""
        if self._in_scope is not None and not self._in_scope(url):
            raise _Skip("out of the crawl's scope")
        try:
            origin = origin_of(url)
        except BadUrl as exc:
            raise _Skip(str(exc)) from None
        delay_s = self._delay_s
        if self._robots is not None:
            decision = await self._robots.check(url)
            if not decision.allowed:
                raise _Skip(decision.reason or "disallowed by robots.txt")
            if decision.crawl_delay_s is not None:
                delay_s = max(delay_s, min(decision.crawl_delay_s, self._max_crawl_delay_s))
        last_end = self._last_end.get(origin)
        if last_end is not None:
            await self._clock.sleep(last_end + delay_s - self._clock.now())

    def leave(self, url: str) -> None:
        """The fetch of ``url`` ended: its host's delay runs from now."""
        self._last_end[origin_of(url)] = self._clock.now()


async def _fetch_body(fetch: FetchFn, url: str, max_bytes: int) -> bytes:
    try:
        result = await fetch(url)
    except FetchError as exc:
        raise _Skip(f"fetch failed: {exc}") from None
    if not 200 <= result.status < 300:
        raise _Skip(f"HTTP {result.status}")
    if len(result.body) > max_bytes:
        raise _TooLarge(f"body larger than {max_bytes} bytes")
    return result.body
