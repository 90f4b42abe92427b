"""The sitemap format: a body (gzip, XML urlset or sitemap index, plain text) to its URLs.

XML is parsed as a stream with the stdlib expat parser (any DOCTYPE is refused, so no entity
can expand and nothing external is loaded); gzip is inflated in pieces under a size cap. A
body that cannot be read raises ``BadSitemap``; the URLs read before the fault have been
handed out already.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from xml.parsers import expat

_CHUNK_BYTES = 256 * 1024
_MAX_URL_CHARS = 2048  # the sitemaps.org limit
_GZIP_MAGIC = b"\x1f\x8b"


class BadSitemap(Exception):
    """This sitemap body cannot be read; the message says why."""


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


def inflate(body: bytes, max_bytes: int) -> Iterator[bytes]:
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
            raise BadSitemap(f"bad gzip data: {exc}") from None
        pending = inflater.unconsumed_tail
        total += len(chunk)
        if total > max_bytes:
            raise BadSitemap(f"decompresses to more than {max_bytes} bytes")
        yield chunk
    if not inflater.eof:
        raise BadSitemap("truncated gzip data")


class SitemapReader:
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
        """Read the next chunk; None ends the body (``BadSitemap`` if the XML is incomplete)."""
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
        raise BadSitemap("a DOCTYPE in a sitemap is refused (entity expansion)")

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
        raise BadSitemap(f"broken XML: {exc}") from None
