"""Page URLs from sitemaps: XML urlsets, sitemap indexes, gzip, plain text.

Bodies are parsed as a stream with the stdlib expat parser (any DOCTYPE is refused, so no
entity can expand and nothing external is loaded); gzip is inflated in pieces under the same
size cap. A sitemap that cannot be fetched, is too large or is broken is skipped with a logged
reason; the URLs it gave before the fault are kept, and the other sitemaps are read on.

A sitemap is fetched like a page: only when the crawl's scope takes its URL (an index may list
sitemaps on any host), when robots.txt allows it, and no sooner than the host's delay (or its
Crawl-delay) after the last sitemap fetched from that host.

``sitemap_entries`` also gives each page's ``<lastmod>`` (W3C datetime, as epoch seconds;
None when absent or unreadable), which moves a known URL up (``Frontier.expedite``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import zlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from xml.parsers import expat

from crawlfleet.clock import Clock, SystemClock
from crawlfleet.errors import BadUrl, FetchError
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of

logger = logging.getLogger(__name__)

_CHUNK_BYTES = 256 * 1024
_MAX_URL_CHARS = 2048  # the sitemaps.org limit
_GZIP_MAGIC = b"\x1f\x8b"
MAX_CRAWL_DELAY_S = 60.0


class _Skip(Exception):
    """This sitemap is skipped; the message says why."""


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """A page URL of a sitemap and its ``<lastmod>`` (epoch s; None: not given)."""

    url: str
    lastmod: float | None = None


def lastmod_epoch(text: str) -> float | None:
    """Epoch seconds of a W3C datetime (``2024-05-01``, ``2024-05-01T12:00:00+02:00``;
    no zone = UTC), or None when it is not one."""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


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
    clock: Clock | None = None,
    max_urls: int = 1_000_000,
    max_depth: int = 3,
    max_bytes: int = 50 * 1024 * 1024,
    max_sitemaps: int = 10_000,
) -> AsyncIterator[SitemapEntry]:
    """The page URLs of the ``start`` sitemaps and of the sitemaps their indexes list.

    A sitemap is fetched only if ``in_scope`` takes its URL and ``robots`` allows it, at
    least ``delay_s`` (or the host's Crawl-delay, at most ``MAX_CRAWL_DELAY_S``) after the
    previous sitemap fetch from its host ended; a refused one is skipped with a logged
    reason. Indexes are followed ``max_depth`` levels down; each sitemap is fetched once, at
    most ``max_sitemaps`` in all. ``max_bytes`` caps each body, before and after gzip. Stops
    after ``max_urls`` URLs. URLs are absolute, in sitemap order, not deduplicated.
    """
    gate = _Gate(in_scope, robots, delay_s, clock or SystemClock())
    queue = deque((url, 0) for url in dict.fromkeys(start))
    seen = set(start)
    count = 0
    while queue:
        url, depth = queue.popleft()
        try:
            await gate.enter(url)
            try:
                body = await _fetch_body(fetch, url, max_bytes)
            finally:
                gate.leave(url)
            reader = _Reader()
            for chunk in itertools.chain(_inflate(body, max_bytes), [None]):
                reader.feed(chunk)
                for page in reader.take_pages():
                    yield page
                    count += 1
                    if count >= max_urls:
                        return
                for child in reader.take_sitemaps():
                    if depth < max_depth and child not in seen and len(seen) < max_sitemaps:
                        seen.add(child)
                        queue.append((child, depth + 1))
                await asyncio.sleep(0)  # a 50 MB sitemap must not stall the event loop
        except _Skip as exc:
            logger.warning("skipping sitemap %s: %s", url, exc)


class _Gate:
    """Scope, robots.txt and per-host pacing for sitemap fetches."""

    def __init__(
        self,
        in_scope: Callable[[str], bool] | None,
        robots: RobotsCache | None,
        delay_s: float,
        clock: Clock,
    ) -> None:
        self._in_scope = in_scope
        self._robots = robots
        self._delay_s = delay_s
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
                delay_s = max(delay_s, min(decision.crawl_delay_s, MAX_CRAWL_DELAY_S))
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
        raise _Skip(f"body larger than {max_bytes} bytes")
    return result.body


def _inflate(body: bytes, max_bytes: int) -> Iterator[bytes]:
    """The body in chunks, gunzipped when it starts with the gzip magic bytes.

    A ``.gz`` sitemap the fetcher already decompressed (Content-Encoding) is read as is.
    """
    if not body.startswith(_GZIP_MAGIC):
        for start in range(0, len(body), _CHUNK_BYTES):
            yield body[start : start + _CHUNK_BYTES]
        return
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    pending = body
    total = 0
    while pending and not inflater.eof:
        try:
            chunk = inflater.decompress(pending, _CHUNK_BYTES)
        except zlib.error as exc:
            raise _Skip(f"bad gzip data: {exc}") from None
        pending = inflater.unconsumed_tail
        total += len(chunk)
        if total > max_bytes:
            raise _Skip(f"decompresses to more than {max_bytes} bytes")
        yield chunk
    if not inflater.eof:
        raise _Skip("truncated gzip data")


class _Reader:
    """Picks page and sitemap URLs out of a sitemap body fed in chunks (XML or plain text)."""

    def __init__(self) -> None:
        self._xml: expat.XMLParserType | None = None
        self._is_text: bool | None = None
        self._line_tail = b""
        self._parents: list[str] = []
        self._loc_parts: list[str] | None = None
        self._lastmod_parts: list[str] | None = None
        self._page: str | None = None
        self._lastmod: float | None = None
        self._pages: list[SitemapEntry] = []
        self._sitemaps: list[str] = []

    def feed(self, chunk: bytes | None) -> None:
        """Read the next chunk; None ends the body (``_Skip`` if the XML is incomplete)."""
        if chunk is None:
            self._close()
            return
        if self._is_text is None:
            # Leading blanks and a BOM: expat rejects blanks before <?xml ...?>.
            chunk = chunk.lstrip(b"\xef\xbb\xbf \t\r\n")
            if not chunk:
                return
            self._is_text = not chunk.startswith(b"<")
            if not self._is_text:
                self._xml = self._new_parser()
        if self._xml is not None:
            _parse(self._xml, chunk, final=False)
        else:
            lines = (self._line_tail + chunk).split(b"\n")
            self._line_tail = lines.pop()
            for line in lines:
                self._add_page(line.decode("utf-8", errors="replace"), None)

    def _close(self) -> None:
        if self._xml is not None:
            _parse(self._xml, b"", final=True)
        elif self._line_tail:
            self._add_page(self._line_tail.decode("utf-8", errors="replace"), None)
            self._line_tail = b""

    def take_pages(self) -> list[SitemapEntry]:
        pages, self._pages = self._pages, []
        return pages

    def take_sitemaps(self) -> list[str]:
        sitemaps, self._sitemaps = self._sitemaps, []
        return sitemaps

    def _new_parser(self) -> expat.XMLParserType:
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.StartElementHandler = self._start
        parser.EndElementHandler = self._end
        parser.CharacterDataHandler = self._text
        parser.StartDoctypeDeclHandler = self._refuse_doctype
        return parser

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        # Match local names: sitemaps in the wrong (or no) namespace are common. Extensions
        # such as image:loc sit under image:image, not directly under url.
        local = name.rpartition(" ")[2]
        if local == "loc" and self._parents and self._parents[-1] in ("url", "sitemap"):
            self._loc_parts = []
        if local == "lastmod" and self._parents and self._parents[-1] == "url":
            self._lastmod_parts = []
        self._parents.append(local)

    def _end(self, name: str) -> None:
        self._parents.pop()
        local = name.rpartition(" ")[2]
        if self._loc_parts is not None and local == "loc":
            if self._parents[-1] == "sitemap":
                self._add(self._sitemaps, "".join(self._loc_parts))
            else:
                self._page = "".join(self._loc_parts)
            self._loc_parts = None
        elif self._lastmod_parts is not None and local == "lastmod":
            self._lastmod = lastmod_epoch("".join(self._lastmod_parts))
            self._lastmod_parts = None
        elif local == "url":
            if self._page is not None:
                self._add_page(self._page, self._lastmod)
            self._page, self._lastmod = None, None

    def _text(self, data: str) -> None:
        if self._loc_parts is not None:
            self._loc_parts.append(data)
        elif self._lastmod_parts is not None:
            self._lastmod_parts.append(data)

    def _refuse_doctype(self, *args: object) -> None:
        raise _Skip("a DOCTYPE in a sitemap is refused (entity expansion)")

    def _add_page(self, raw: str, lastmod: float | None) -> None:
        found: list[str] = []
        self._add(found, raw)
        self._pages.extend(SitemapEntry(url, lastmod) for url in found)

    def _add(self, target: list[str], raw: str) -> None:
        """Keep absolute http(s) URLs only: sitemaps.org requires them, and a plain-text
        sitemap's other lines are noise."""
        url = raw.strip()
        if len(url) <= _MAX_URL_CHARS and url[:8].lower().startswith(("http://", "https://")):
            target.append(url)


def _parse(parser: expat.XMLParserType, data: bytes, *, final: bool) -> None:
    try:
        parser.Parse(data, final)
    except expat.ExpatError as exc:
        raise _Skip(f"broken XML: {exc}") from None
