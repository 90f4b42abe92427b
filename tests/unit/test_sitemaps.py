"""One sitemap body read (``read_sitemap``: formats, faults, limits), and default_sitemaps
against a local aiohttp server.

What the crawl does with a sitemap (scope, robots.txt, pacing, index limits, failures) is
tested through the crawl step in ``test_sitemap_requests.py``."""

from __future__ import annotations

import codecs
import gzip
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from crawlfleet.errors import FetchError
from crawlfleet.frontier.robots import FetchFn, RobotsCache
from crawlfleet.frontier.sitemap_format import BadSitemap, SitemapTooLarge
from crawlfleet.frontier.sitemaps import SitemapEntry, SitemapTally, default_sitemaps, read_sitemap
from crawlfleet.models import FetchResult
from tests.fixtures.clock import FakeClock

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
IMAGE_NS = 'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'


def urlset(urls: list[str], extra: str = "") -> bytes:
    entries = "".join(f"<url><loc> {u} </loc><lastmod>2024-01-01</lastmod></url>" for u in urls)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}{extra}>{entries}</urlset>'.encode()
    )


def index(urls: list[str]) -> bytes:
    entries = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
    return f"<?xml version='1.0'?><sitemapindex {NS}>{entries}</sitemapindex>".encode()


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<urlset><url><loc>http://bomb.example/&lol3;</loc></url></urlset>"""


class Site:
    """Serves fixed bodies by path and counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.pages: dict[str, tuple[bytes, dict[str, str]]] = {}
        self.base = ""

    def put(self, path: str, body: bytes, **headers: str) -> None:
        self.pages[path] = (body, headers)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        if request.path not in self.pages:
            return web.Response(status=404, text="no")
        body, headers = self.pages[request.path]
        return web.Response(body=body, headers=headers)


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


@pytest.fixture
async def fetch() -> AsyncIterator[FetchFn]:
    """A minimal fetcher: any status is a result; no response is a FetchError."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:

        async def get(url: str) -> FetchResult:
            started = time.monotonic()
            try:
                async with session.get(url) as response:
                    return FetchResult(
                        url=url,
                        final_url=str(response.url),
                        status=response.status,
                        headers={k.lower(): v for k, v in response.headers.items()},
                        body=await response.read(),
                        elapsed_s=time.monotonic() - started,
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise FetchError(f"{type(exc).__name__}: {exc}") from exc

        yield get


async def test_default_sitemaps_from_robots(site: Site, fetch: FetchFn) -> None:
    site.put("/robots.txt", f"User-agent: *\nSitemap: {site.base}/listed.xml\n".encode())
    robots = RobotsCache(
        fetch, user_agent="crawlfleet/0.1", clock=FakeClock(), ttl_s=60, error_ttl_s=60
    )
    assert await default_sitemaps(robots, f"{site.base}/some/page") == [
        f"{site.base}/listed.xml",
        f"{site.base}/sitemap.xml",
    ]


async def test_default_sitemaps_respects_robots(site: Site, fetch: FetchFn) -> None:
    site.put("/robots.txt", b"User-agent: *\nDisallow: /sitemap.xml\n")
    robots = RobotsCache(
        fetch, user_agent="crawlfleet/0.1", clock=FakeClock(), ttl_s=60, error_ttl_s=60
    )
    assert await default_sitemaps(robots, f"{site.base}/") == []


B = "http://a.test"


def read_all(
    body: bytes, url: str = f"{B}/sitemap.xml", tally: SitemapTally | None = None, **limits: int
) -> tuple[list[SitemapEntry], list[str]]:
    """Every page entry and child sitemap of one body, as the crawl step reads it."""
    pages: list[SitemapEntry] = []
    children: list[str] = []
    for chunk_pages, chunk_children in read_sitemap(url, body, tally or SitemapTally(), **limits):
        pages += chunk_pages
        children += chunk_children
    return pages, children


def urls_of(
    body: bytes, url: str = f"{B}/sitemap.xml", tally: SitemapTally | None = None
) -> list[str]:
    return [entry.url for entry in read_all(body, url, tally)[0]]


def test_index_image_gzip_text_and_broken_xml(caplog: pytest.LogCaptureFixture) -> None:
    children = [f"{B}/pages.xml", f"{B}/more.xml.gz", f"{B}/list.txt", f"{B}/pages.xml"]
    assert read_all(index(children)) == ([], children)  # deduplicated by the frontier
    image = (
        f"<url><loc>{B}/p/3</loc><image:image><image:loc>{B}/img.png</image:loc>"
        "</image:image></url>"
    )
    pages = urlset([f"{B}/p/1", f"{B}/p/2"], f" {IMAGE_NS}")
    pages = pages.replace(b"</urlset>", image.encode() + b"</urlset>")
    assert urls_of(pages) == [f"{B}/p/1", f"{B}/p/2", f"{B}/p/3"]  # the image is no page
    assert urls_of(gzip.compress(urlset([f"{B}/gz/1", f"{B}/gz/2"]))) == [
        f"{B}/gz/1",
        f"{B}/gz/2",
    ]
    text = f"\ufeff{B}/t/1\r\n\n  {B}/t/2  \nnot a url\nftp://x/y\n{B}/t/3".encode()
    assert urls_of(text, f"{B}/list.txt") == [f"{B}/t/1", f"{B}/t/2", f"{B}/t/3"]
    broken = b"<urlset><url><loc>http://broken.example/1</loc></url></urlse>"
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        assert urls_of(broken, f"{B}/broken.xml") == ["http://broken.example/1"]
    assert f"{B}/broken.xml: 0 broken entries skipped, 2 XML faults read past" in caplog.text


def test_large_streamed_sitemap() -> None:
    urls = urls_of(gzip.compress(urlset([f"{B}/item/{i}" for i in range(50_000)])))
    assert len(urls) == 50_000
    assert urls[-1] == f"{B}/item/49999"


def test_entity_bomb_is_not_expanded(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        assert urls_of(BOMB, f"{B}/bomb.xml") == []
    assert f"{B}/bomb.xml: 1 broken entries skipped" in caplog.text


def test_a_body_over_max_bytes_as_fetched_or_inflated_is_too_large() -> None:
    with pytest.raises(SitemapTooLarge, match="body larger than 2048 bytes"):
        read_all(urlset([f"{B}/big/{i}" for i in range(100)]), max_bytes=2048)
    zeros = gzip.compress(b"<urlset>" + b" " * 5_000_000)  # 5 KB that inflate to 5 MB
    with pytest.raises(SitemapTooLarge, match="decompresses to more than 1000000 bytes"):
        read_all(zeros, max_bytes=1_000_000)
    with pytest.raises(BadSitemap, match="bad gzip data") as bad:
        read_all(b"\x1f\x8bnot really gzip")
    assert not isinstance(bad.value, SitemapTooLarge)  # unreadable, not over a limit


def test_a_gz_url_whose_body_came_decompressed_is_read_as_is() -> None:
    assert urls_of(urlset([f"{B}/enc"]), f"{B}/enc.xml.gz") == [f"{B}/enc"]


def test_leading_blanks_and_bom_before_xml() -> None:
    assert urls_of(b"\xef\xbb\xbf\n\n  " + urlset([f"{B}/ok"])) == [f"{B}/ok"]


def test_html_soft_404_gives_nothing() -> None:
    assert urls_of(b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>") == []
    assert urls_of(b"<html><body><loc>http://nope/</loc></body></html>") == []


# Real files: XML faults, UTF-16, DOCTYPEs, feeds (issue 33).


def test_one_xml_fault_keeps_every_other_entry(caplog: pytest.LogCaptureFixture) -> None:
    # An unescaped & (as real CMSs write it) and, later, an entry whose tags are broken.
    body = urlset([f"{B}/p/{i}" for i in range(100)])
    body = body.replace(f"{B}/p/40 ".encode(), f"{B}/p/40?a=1&b=2 ".encode())
    body = body.replace(f"<url><loc> {B}/p/70 </loc>".encode(), b"<url><lo <loc></url>")
    tally = SitemapTally()
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = urls_of(body, f"{B}/faulty.xml", tally)
    expected = [f"{B}/p/{i}" for i in range(100) if i != 70]
    expected[40] = f"{B}/p/40?a=1&b=2"
    assert urls == expected
    assert tally.broken_entries == 1
    assert tally.xml_faults >= 2
    assert f"{B}/faulty.xml: 1 broken entries skipped, {tally.xml_faults} XML faults" in (
        caplog.text
    )


def test_a_fault_in_a_large_sitemap_loses_no_entry_of_its_chunk() -> None:
    body = urlset([f"{B}/item/{i}" for i in range(5000)])  # ~390 KB: two 256 KiB chunks
    body = body.replace(f"{B}/item/2500 ".encode(), f"{B}/item/2500?x=<y ".encode())
    urls = urls_of(body)
    assert len(urls) == 5000  # the stray < is read as text: a fault, the URL as written
    assert (urls[0], urls[2500], urls[-1]) == (
        f"{B}/item/0",
        f"{B}/item/2500?x=<y",
        f"{B}/item/4999",
    )


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-16"])
def test_utf16_sitemaps_are_read(codec: str) -> None:
    text = urlset([f"{B}/é/1", f"{B}/2"]).decode().replace("UTF-8", "UTF-16")
    # "utf-16": with a BOM; the others without
    assert urls_of(text.encode(codec)) == [f"{B}/é/1", f"{B}/2"]
    index16 = codecs.BOM_UTF16_LE + index([f"{B}/u16.xml"]).decode().encode("utf-16-le")
    assert read_all(index16) == ([], [f"{B}/u16.xml"])
    assert urls_of(text.encode()) == [f"{B}/é/1", f"{B}/2"]  # says UTF-16, is UTF-8


BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + b"".join(
        f' <!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">\n'.encode()
        for n in range(1, 10)
    )
    + b"]>\n<urlset><url><loc>http://bomb.example/&lol9;</loc></url>"
)


def test_billion_laughs_is_read_without_expanding() -> None:
    tally = SitemapTally()
    started = time.monotonic()
    body = BILLION_LAUGHS + f"<url><loc>{B}/after</loc></url></urlset>".encode()
    assert urls_of(body, tally=tally) == [f"{B}/after"]
    assert tally.broken_entries == 1
    assert time.monotonic() - started < 2.0  # 10⁹ "lol"s would take minutes and GBs


def test_rss_and_atom_feeds_as_google_reads_them() -> None:
    rss = (
        '<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel>'
        f"<title>News</title><link>{B}/</link>"
        f"<item><title>One</title><link>{B}/news/caf\xe9</link>"
        "<pubDate>Mon, 01 Jan 2024 10:00:00 GMT</pubDate></item>"
        f"<item><link> {B}/news/2 </link><guid>{B}/guid/2</guid></item>"
        "<item><title>no link</title></item>"
        "</channel></rss>"
    ).encode("latin-1")
    atom = (
        '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
        f'<link rel="self" href="{B}/feed.atom"/><link href="{B}/"/>'
        f'<entry><link rel="edit" href="{B}/edit/1"/><link href="{B}/posts/1"/>'
        "<updated>2024-02-01T00:00:00Z</updated></entry>"
        f"<entry><link rel='alternate' type='text/html' href='{B}/posts/2?a=1&amp;b=2'/>"
        "</entry></feed>"
    ).encode()
    tally = SitemapTally()
    entries = read_all(rss, f"{B}/feed.rss", tally)[0] + read_all(atom, f"{B}/feed.atom", tally)[0]
    assert [(e.url, e.lastmod) for e in entries] == [
        (f"{B}/news/café", 1704103200.0),
        (f"{B}/news/2", None),
        (f"{B}/posts/1", 1706745600.0),
        (f"{B}/posts/2?a=1&b=2", None),
    ]
    assert tally.broken_entries == 1


def test_a_hostile_page_of_unclosed_tags_is_read_in_linear_time() -> None:
    tally = SitemapTally()
    started = time.monotonic()
    assert (
        urls_of(b"<!doctype html><urlset>" + b"<p><br>x</i>" * 100_000 + b"</urlset>", tally=tally)
        == []
    )
    assert time.monotonic() - started < 5.0
    assert tally.xml_faults > 100_000
    # Past the elements followed, an entry is broken (never a crash) unless it is read whole.
    deep = f"<url><lastmod>2024-01-01</lastmod><loc>{B}/deep</loc></url>".encode() * 2
    whole = f"<url><loc>{B}/whole</loc></url>".encode()
    tally = SitemapTally()
    assert urls_of(b"<urlset>" + b"<div>" * 70 + deep + whole, tally=tally) == [f"{B}/whole"]
    assert tally.broken_entries == 2
