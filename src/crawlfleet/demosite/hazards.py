"""The lab's hazards: error statuses, flaky, slow, hanging, huge, bomb and spider-trap pages.

Only ``/hazards`` links to them, and nothing reachable from the lab's home links to it. The
traps never end by themselves: a calendar (every month links its neighbours), a relative link
that deepens the path, a search whose every page adds a query parameter, a link 500,000
characters long, a page of 200,000 links and HTML nested 100,000 elements deep. The crawler's
default limits (depth, URL rules, links per page, parse budget) are what stop them, and
each counts what it stopped (decision 0043).
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections import Counter
from collections.abc import Callable

import brotli
from aiohttp import web

from crawlfleet.demosite.pages import HTML_TYPE, html_response, link_list, page, simple_page

BOMB_SIZE_MIB = 100
BIG_DECLARED_MIB = 64
_CHUNK = 64 * 1024
_MIB = 1024 * 1024
_BOMB_PREFIX = b"<!DOCTYPE html>\n<html><body>"
LONG_URL_CHARS = 500_000
MANY_LINKS = 200_000
NESTED_DEPTH = 100_000
HAZARD_LINKS: tuple[str, ...] = (
    "/status/500",
    "/status/503",
    "/status/429?retry_after=1",
    "/flaky/hazards?fail=2",
    "/slow?delay_ms=300",
    "/hang",
    "/big?kib=512",
    "/big-declared",
    "/bomb",
    "/bomb-br",
    "/trap/calendar/2024/01",
    "/trap/repeat/",
    "/trap/facets",
    "/trap/long-url",
    "/trap/many-links",
    "/nested",
    "/redirect/loop",
    "/redirect/chain/25",
    "/redirect/offsite",
)


class FlakyCounters:
    """How many times each ``/flaky/<name>`` was requested."""

    def __init__(self) -> None:
        self._hits: Counter[str] = Counter()

    def hit(self, name: str) -> int:
        """Count one request to ``name``; returns the count including this one."""
        self._hits[name] += 1
        return self._hits[name]

    def reset(self) -> None:
        self._hits.clear()


class _Lazy:
    """Bytes built once, on first use, in a worker thread (building a bomb takes ~0.2 s)."""

    def __init__(self, build: Callable[[], bytes]) -> None:
        self._build = build
        self._value: bytes | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> bytes:
        async with self._lock:
            if self._value is None:
                self._value = await asyncio.get_running_loop().run_in_executor(None, self._build)
            return self._value


def _bomb_plain_chunks() -> list[bytes]:
    filler = BOMB_SIZE_MIB * _MIB - len(_BOMB_PREFIX)
    return [_BOMB_PREFIX, *([b" " * _MIB] * (filler // _MIB)), b" " * (filler % _MIB)]


def build_gzip_bomb() -> bytes:
    """``BOMB_SIZE_MIB`` MiB of HTML gzip-compressed to about 100 KiB."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: gzip container
    parts = [compressor.compress(chunk) for chunk in _bomb_plain_chunks()]
    return b"".join([*parts, compressor.flush()])


def build_brotli_bomb() -> bytes:
    """``BOMB_SIZE_MIB`` MiB of HTML brotli-compressed to a few hundred bytes."""
    compressed: bytes = brotli.compress(b"".join(_bomb_plain_chunks()), quality=5)
    return compressed


class Hazards:
    """Request handlers of the lab's hazards; the flaky counters are the site's own."""

    def __init__(self, flaky: FlakyCounters) -> None:
        self._flaky = flaky
        self._gzip_bomb = _Lazy(build_gzip_bomb)
        self._brotli_bomb = _Lazy(build_brotli_bomb)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/hazards", self.index),
            web.get("/status/{code:\\d{3}}", self.status),
            web.get("/flaky/{name}", self.flaky),
            web.get("/slow", self.slow),
            web.get("/hang", self.hang),
            web.get("/big", self.big),
            web.get("/big-declared", self.big_declared),
            web.get("/bomb", self.bomb),
            web.get("/bomb-br", self.bomb_br),
            web.get("/trap/calendar/{year:\\d{4}}/{month:\\d{2}}", self.calendar),
            web.get("/trap/repeat/{tail:.*}", self.repeat),
            web.get("/trap/facets", self.facets),
            web.get("/trap/long-url", self.long_url),
            web.get("/trap/many-links", self.many_links),
            web.get("/nested", self.nested),
        ]

    async def index(self, request: web.Request) -> web.Response:
        body = "<h1>Hazards</h1>\n" + link_list((h, h) for h in HAZARD_LINKS)
        return html_response(page("Hazards", body))

    async def status(self, request: web.Request) -> web.Response:
        """Any status 200-599; 429 and 503 carry ``Retry-After`` (``?retry_after=``, default 1)."""
        code = int(request.match_info["code"])
        if not 200 <= code <= 599:
            raise web.HTTPBadRequest(text="status must be 200-599")
        headers = {}
        if code in (429, 503) or "retry_after" in request.query:
            headers["Retry-After"] = request.query.get("retry_after", "1")
        if code in (204, 304):
            return web.Response(status=code, headers=headers)
        markup = page(f"Status {code}", f"<h1>Status {code}</h1>")
        return web.Response(status=code, headers=headers, text=markup, content_type=HTML_TYPE)

    async def flaky(self, request: web.Request) -> web.Response:
        """``/flaky/<name>?fail=N``: 500 for the first N requests to ``name`` (default 1)."""
        name = request.match_info["name"]
        hits = self._flaky.hit(name)
        if hits <= int(request.query.get("fail", "1")):
            return html_response(page("Flaky", f"<h1>Failure {hits}</h1>"), status=500)
        return simple_page(f"Flaky {name} recovered", [("/", "home")])

    async def slow(self, request: web.Request) -> web.StreamResponse:
        """Headers and the first half of the page at once, the rest after ``delay_ms``."""
        delay_ms = int(request.query.get("delay_ms", "1000"))
        body = page("Slow", "<h1>Slow page</h1>\n<p>It took its time.</p>").encode()
        response = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        response.content_length = len(body)
        await response.prepare(request)
        half = len(body) // 2
        await response.write(body[:half])
        await asyncio.sleep(delay_ms / 1000)
        await response.write(body[half:])
        await response.write_eof()
        return response

    async def hang(self, request: web.Request) -> web.Response:
        """Never answers; the handler is cancelled when the client disconnects."""
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the event is never set")

    async def big(self, request: web.Request) -> web.StreamResponse:
        """``/big?kib=N`` (default 1024): an N KiB plain-text body with a true Content-Length."""
        return await _stream_filler(request, int(request.query.get("kib", "1024")) * 1024)

    async def big_declared(self, request: web.Request) -> web.StreamResponse:
        """A ``?mib=`` (default 64) MiB body, sent only as fast as the client reads it."""
        return await _stream_filler(request, int(request.query.get("mib", BIG_DECLARED_MIB)) * _MIB)

    async def bomb(self, request: web.Request) -> web.Response:
        return _encoded(await self._gzip_bomb.get(), "gzip")

    async def bomb_br(self, request: web.Request) -> web.Response:
        return _encoded(await self._brotli_bomb.get(), "br")

    async def calendar(self, request: web.Request) -> web.Response:
        """A spider trap: every month links to the month before and after, without end."""
        year, month = int(request.match_info["year"]), int(request.match_info["month"])
        if not 1 <= month <= 12:
            raise web.HTTPNotFound()
        index = year * 12 + month - 1
        links = [
            (f"/trap/calendar/{i // 12:04d}/{i % 12 + 1:02d}", label)
            for i, label in ((index - 1, "previous month"), (index + 1, "next month"))
            if 0 <= i < 10000 * 12
        ]
        return simple_page(f"Calendar {year:04d}-{month:02d}", links)

    async def repeat(self, request: web.Request) -> web.Response:
        """A spider trap: a relative link that makes the path one ``a/b/`` longer each time."""
        return simple_page(f"Repeat {request.match_info['tail']}", [("a/b/", "deeper")])

    async def facets(self, request: web.Request) -> web.Response:
        """A spider trap: a search whose every page links one with one more filter."""
        query = "&".join(
            [*(f"{k}={v}" for k, v in request.query.items()), f"f{len(request.query)}=1"]
        )
        return simple_page(f"Facets {len(request.query)}", [(f"/trap/facets?{query}", "refine")])

    async def long_url(self, request: web.Request) -> web.Response:
        """A page linking a URL of ``LONG_URL_CHARS`` characters."""
        href = "/trap/long-url?q=" + "x" * (LONG_URL_CHARS - len("/trap/long-url?q="))
        return simple_page("Long URL", [(href, "long")])

    async def many_links(self, request: web.Request) -> web.Response:
        """``MANY_LINKS`` links into ``/private/`` (robots.txt disallows it: none is fetched)."""
        links = "".join(f'<a href="/private/many/{i}">{i}</a>\n' for i in range(MANY_LINKS))
        return html_response(page("Many links", links))

    async def nested(self, request: web.Request) -> web.Response:
        """``?depth=N`` (default ``NESTED_DEPTH``) unclosed ``<div>``, gzip: 1 KB on the wire."""
        depth = int(request.query.get("depth", NESTED_DEPTH))
        markup = page("Nested", "<div>" * depth + '<a href="/hazards">out</a>')
        return _encoded(gzip.compress(markup.encode(), mtime=0), "gzip")


def _encoded(body: bytes, encoding: str) -> web.Response:
    headers = {"Content-Encoding": encoding}
    return web.Response(body=body, headers=headers, content_type=HTML_TYPE, charset="utf-8")


async def _stream_filler(request: web.Request, size_bytes: int) -> web.StreamResponse:
    """Stream ``size_bytes`` of ``x``; stops quietly when the client hangs up."""
    response = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
    response.content_length = size_bytes
    await response.prepare(request)
    chunk = b"x" * _CHUNK
    sent = 0
    try:
        while sent < size_bytes:
            part = chunk[: size_bytes - sent]
            await response.write(part)
            sent += len(part)
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client gave up on the body, which is what a size limit does
    return response
