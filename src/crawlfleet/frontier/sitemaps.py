"""Sitemap requests, and one sitemap's body read.

A crawl reads its sitemaps as requests of its frontier (decision 0052): a sitemap request
carries ``{SITEMAP_KEY: depth}`` in its ``data``, is claimed, paced, allowed by robots.txt and
retried like a page, and its body is read by ``read_sitemap`` (``runtime/admission.py`` admits
what it lists and counts the ``SitemapLimits``).

A body is read by ``sitemap_format`` (XML urlsets, sitemap indexes, RSS and Atom feeds, gzip,
plain text): broken XML is read past, its broken entries skipped and counted (a warning line a
sitemap, and ``SitemapTally`` for the caller). Each page's ``<lastmod>`` (W3C datetime, as
epoch seconds; None when absent or unreadable) moves a known URL up (``Frontier.expedite``).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from crawlfleet.frontier.robots import RobotsCache, origin_of
from crawlfleet.frontier.sitemap_format import SitemapEntry, SitemapReader, inflate

__all__ = [
    "DEFAULT_SITEMAP_LIMITS",
    "SITEMAP_KEY",
    "SitemapEntry",
    "SitemapLimits",
    "SitemapTally",
    "default_sitemaps",
    "read_sitemap",
    "sitemap_depth",
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
    sitemaps_skipped: int = 0  # out of the crawl's scope, or unreadable
    sitemaps_over_limits: int = 0  # listed by an index past max_depth, max_sitemaps or the budget
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


async def default_sitemaps(robots: RobotsCache, seed_url: str) -> list[str]:
    """The sitemaps to read for a seed's origin: robots.txt ``Sitemap:`` lines, /sitemap.xml.

    /sitemap.xml is left out when robots.txt disallows it.
    """
    listed = await robots.sitemaps(seed_url)
    fallback = f"{origin_of(seed_url)}/sitemap.xml"
    if fallback not in listed and (await robots.check(fallback)).allowed:
        listed.append(fallback)
    return listed


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
