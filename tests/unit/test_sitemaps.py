"""sitemap_entries and default_sitemaps against a local aiohttp server."""

from __future__ import annotations

import codecs
import gzip
import itertools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from crawlfleet.clock import FakeClock
from crawlfleet.counters import Limit
from crawlfleet.errors import FetchError
from crawlfleet.frontier.robots import FetchFn, RobotsCache
from crawlfleet.frontier.sitemaps import (
    SitemapEntry,
    SitemapLimits,
    SitemapTally,
    default_sitemaps,
    sitemap_entries,
)
from crawlfleet.models import FetchResult

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


async def collect(entries: AsyncIterator[SitemapEntry]) -> list[str]:
    return [entry.url async for entry in entries]


async def test_index_gz_text_broken_and_missing(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    b = site.base
    site.put(
        "/sitemap_index.xml",
        index(
            [
                f"{b}/pages.xml",
                f"{b}/more.xml.gz",
                f"{b}/broken.xml",
                f"{b}/list.txt",
                f"{b}/missing.xml",
                f"{b}/nested.xml",
                f"{b}/pages.xml",
            ]
        ),
    )
    image = (
        f"<url><loc>{b}/p/3</loc><image:image><image:loc>{b}/img.png</image:loc>"
        "</image:image></url>"
    )
    site.put(
        "/pages.xml",
        urlset([f"{b}/p/1", f"{b}/p/2"], f" {IMAGE_NS}").replace(
            b"</urlset>", image.encode() + b"</urlset>"
        ),
    )
    site.put("/more.xml.gz", gzip.compress(urlset([f"{b}/gz/1", f"{b}/gz/2"])))
    site.put("/broken.xml", b"<urlset><url><loc>http://broken.example/1</loc></url></urlse>")
    site.put(
        "/list.txt",
        f"\ufeff{b}/t/1\r\n\n  {b}/t/2  \nnot a url\nftp://x/y\n{b}/t/3".encode(),
    )
    site.put("/nested.xml", index([f"{b}/deep.xml"]))
    site.put("/deep.xml", urlset([f"{b}/deep/1"]))

    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(sitemap_entries(fetch, [f"{b}/sitemap_index.xml"]))

    assert urls == [
        f"{b}/p/1",
        f"{b}/p/2",
        f"{b}/p/3",
        f"{b}/gz/1",
        f"{b}/gz/2",
        "http://broken.example/1",
        f"{b}/t/1",
        f"{b}/t/2",
        f"{b}/t/3",
        f"{b}/deep/1",
    ]
    assert site.hits["/pages.xml"] == 1
    messages = caplog.text
    assert f"{b}/broken.xml: 0 broken entries skipped, 2 XML faults read past" in messages
    assert f"{b}/missing.xml: HTTP 404" in messages


async def test_depth_limit(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/a.xml", index([f"{b}/b.xml", f"{b}/pa.xml"]))
    site.put("/b.xml", index([f"{b}/c.xml"]))
    site.put("/c.xml", urlset([f"{b}/deep"]))
    site.put("/pa.xml", urlset([f"{b}/shallow"]))
    dropped: Counter[Limit] = Counter()
    tally = SitemapTally()
    entries = sitemap_entries(
        fetch, [f"{b}/a.xml"], limits=SitemapLimits(max_depth=1), dropped=dropped, tally=tally
    )
    assert await collect(entries) == [f"{b}/shallow"]
    assert site.hits["/c.xml"] == 0
    assert dropped == {Limit.SITEMAP_MAX_DEPTH: 1}  # c.xml, listed too deep
    assert tally.sitemaps_over_limits == 1
    assert await collect(
        sitemap_entries(fetch, [f"{b}/a.xml"], limits=SitemapLimits(max_depth=2))
    ) == [
        f"{b}/shallow",
        f"{b}/deep",
    ]


async def test_index_cycles_are_fetched_once(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/a.xml", index([f"{b}/b.xml"]))
    site.put("/b.xml", index([f"{b}/a.xml", f"{b}/b.xml"]))
    assert (
        await collect(
            sitemap_entries(fetch, [f"{b}/a.xml", f"{b}/a.xml"], limits=SitemapLimits(max_depth=10))
        )
        == []
    )
    assert site.hits == Counter({"/a.xml": 1, "/b.xml": 1})


async def test_max_urls_stops_early(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/one.xml", urlset([f"{b}/{i}" for i in range(100)]))
    site.put("/two.xml", urlset([f"{b}/x"]))
    dropped: Counter[Limit] = Counter()
    start = [f"{b}/one.xml", f"{b}/two.xml"]
    urls = await collect(
        sitemap_entries(fetch, start, limits=SitemapLimits(max_urls=10), dropped=dropped)
    )
    assert urls == [f"{b}/{i}" for i in range(10)]
    assert site.hits["/two.xml"] == 0
    assert dropped == {Limit.SITEMAP_MAX_URLS: 2}  # one.xml read in part, two.xml not at all


async def test_exactly_max_urls_drops_nothing(site: Site, fetch: FetchFn) -> None:
    site.put("/one.xml", urlset([f"{site.base}/{i}" for i in range(10)]))
    dropped: Counter[Limit] = Counter()
    entries = sitemap_entries(
        fetch, [f"{site.base}/one.xml"], limits=SitemapLimits(max_urls=10), dropped=dropped
    )
    assert len(await collect(entries)) == 10
    assert dropped == {}


async def test_sitemaps_past_the_most_and_too_large_are_counted(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/index.xml", index([f"{b}/s{i}.xml" for i in range(5)] + [f"{b}/big.xml"]))
    for i in range(5):
        site.put(f"/s{i}.xml", urlset([f"{b}/p{i}"]))
    site.put("/big.xml", urlset([f"{b}/big/{i}" for i in range(100)]))
    dropped: Counter[Limit] = Counter()
    entries = sitemap_entries(
        fetch,
        [f"{b}/index.xml", f"{b}/big.xml"],
        limits=SitemapLimits(max_sitemaps=4, max_bytes=2048),
        dropped=dropped,
    )
    assert await collect(entries) == [f"{b}/p0", f"{b}/p1"]
    # index.xml and big.xml are 2 of the 4; s2 .. s4 are past the most; big.xml is too large.
    assert dropped == {Limit.SITEMAP_MAX_SITEMAPS: 3, Limit.SITEMAP_MAX_BYTES: 1}


async def test_large_streamed_sitemap(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/big.xml.gz", gzip.compress(urlset([f"{b}/item/{i}" for i in range(50_000)])))
    urls = await collect(sitemap_entries(fetch, [f"{b}/big.xml.gz"]))
    assert len(urls) == 50_000
    assert urls[-1] == f"{b}/item/49999"


async def test_entity_bomb_is_not_expanded(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    site.put("/bomb.xml", BOMB)
    site.put("/ok.xml", urlset([f"{site.base}/fine"]))
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(
            sitemap_entries(fetch, [f"{site.base}/bomb.xml", f"{site.base}/ok.xml"])
        )
    assert urls == [f"{site.base}/fine"]
    assert f"{site.base}/bomb.xml: 1 broken entries skipped" in caplog.text


async def test_gzip_bomb_is_capped(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    site.put("/zeros.xml.gz", gzip.compress(b"<urlset>" + b" " * 5_000_000))
    site.put("/bad.xml.gz", b"\x1f\x8bnot really gzip")
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(
            sitemap_entries(
                fetch,
                [f"{site.base}/zeros.xml.gz", f"{site.base}/bad.xml.gz"],
                limits=SitemapLimits(max_bytes=1_000_000),
            )
        )
    assert urls == []
    assert "decompresses to more than 1000000 bytes" in caplog.text
    assert "bad gzip data" in caplog.text


async def test_transparently_decompressed_gz_url(site: Site, fetch: FetchFn) -> None:
    body = gzip.compress(urlset([f"{site.base}/enc"]))
    site.put("/enc.xml.gz", body, **{"Content-Encoding": "gzip", "Content-Type": "text/xml"})
    assert await collect(sitemap_entries(fetch, [f"{site.base}/enc.xml.gz"])) == [
        f"{site.base}/enc"
    ]


async def test_unreachable_sitemap_is_skipped(
    fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        assert await collect(sitemap_entries(fetch, ["http://127.0.0.1:9/sitemap.xml"])) == []
    assert "fetch failed" in caplog.text


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


async def test_leading_blanks_and_bom_before_xml(site: Site, fetch: FetchFn) -> None:
    site.put("/blank.xml", b"\xef\xbb\xbf\n\n  " + urlset([f"{site.base}/ok"]))
    assert await collect(sitemap_entries(fetch, [f"{site.base}/blank.xml"])) == [f"{site.base}/ok"]


async def test_html_soft_404_gives_nothing(site: Site, fetch: FetchFn) -> None:
    site.put("/sitemap.xml", b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>")
    site.put("/plain.xml", b"<html><body><loc>http://nope/</loc></body></html>")
    starts = [f"{site.base}/sitemap.xml", f"{site.base}/plain.xml"]
    assert await collect(sitemap_entries(fetch, starts)) == []


# Child sitemaps are fetched like pages: in scope, allowed by robots.txt, paced per host.


def recording(fetch: FetchFn, clock: FakeClock, log: list[tuple[str, float]]) -> FetchFn:
    async def get(url: str) -> FetchResult:
        log.append((url, clock.now()))
        return await fetch(url)

    return get


async def test_child_sitemaps_out_of_scope_are_not_fetched(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    b = site.base
    offsite = b.replace("127.0.0.1", "127.0.0.2")
    site.put("/index.xml", index([f"{offsite}/elsewhere.xml", f"{b}/here.xml"]))
    site.put("/here.xml", urlset([f"{b}/p/1"]))
    clock = FakeClock()
    fetched: list[tuple[str, float]] = []
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(
            sitemap_entries(
                recording(fetch, clock, fetched),
                [f"{b}/index.xml"],
                in_scope=lambda url: url.startswith(b),
                clock=clock,
            )
        )
    assert urls == [f"{b}/p/1"]
    assert [url for url, _ in fetched] == [f"{b}/index.xml", f"{b}/here.xml"]
    assert f"{offsite}/elsewhere.xml: out of the crawl's scope" in caplog.text


async def test_child_sitemaps_disallowed_by_robots_are_not_fetched(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    b = site.base
    site.put("/robots.txt", b"User-agent: *\nDisallow: /private/\n")
    site.put("/index.xml", index([f"{b}/private/secret.xml", f"{b}/open.xml"]))
    site.put("/private/secret.xml", urlset([f"{b}/secret"]))
    site.put("/open.xml", urlset([f"{b}/open"]))
    clock = FakeClock()
    robots = RobotsCache(fetch, user_agent="crawlfleet/0.1", clock=clock, ttl_s=60, error_ttl_s=60)
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(sitemap_entries(fetch, [f"{b}/index.xml"], robots=robots, clock=clock))
    assert urls == [f"{b}/open"]
    assert site.hits["/private/secret.xml"] == 0
    assert "secret.xml: disallowed by robots.txt" in caplog.text


async def test_sitemap_fetches_keep_the_host_delay_and_crawl_delay(
    site: Site, fetch: FetchFn
) -> None:
    b = site.base
    site.put("/index.xml", index([f"{b}/a.xml", f"{b}/b.xml"]))
    site.put("/a.xml", urlset([f"{b}/a"]))
    site.put("/b.xml", urlset([f"{b}/b"]))
    clock = FakeClock()
    fetched: list[tuple[str, float]] = []
    get = recording(fetch, clock, fetched)
    await collect(sitemap_entries(get, [f"{b}/index.xml"], delay_s=5.0, clock=clock))
    times = [at for _, at in fetched]
    assert [later - earlier for earlier, later in itertools.pairwise(times)] == [5.0, 5.0]

    site.put("/robots.txt", b"User-agent: *\nCrawl-delay: 7\n")
    robots = RobotsCache(fetch, user_agent="crawlfleet/0.1", clock=clock, ttl_s=60, error_ttl_s=60)
    fetched.clear()
    await collect(sitemap_entries(get, [f"{b}/index.xml"], robots=robots, delay_s=5.0, clock=clock))
    times = [at for _, at in fetched]
    assert [later - earlier for earlier, later in itertools.pairwise(times)] == [7.0, 7.0]


# Real files: XML faults, UTF-16, DOCTYPEs, feeds (issue 33).


async def test_one_xml_fault_keeps_every_other_entry(
    site: Site, fetch: FetchFn, caplog: pytest.LogCaptureFixture
) -> None:
    b = site.base
    # An unescaped & (as real CMSs write it) and, later, an entry whose tags are broken.
    body = urlset([f"{b}/p/{i}" for i in range(100)])
    body = body.replace(f"{b}/p/40 ".encode(), f"{b}/p/40?a=1&b=2 ".encode())
    body = body.replace(f"<url><loc> {b}/p/70 </loc>".encode(), b"<url><lo <loc></url>")
    site.put("/faulty.xml", body)
    tally = SitemapTally()
    with caplog.at_level(logging.WARNING, logger="crawlfleet.frontier.sitemaps"):
        urls = await collect(sitemap_entries(fetch, [f"{b}/faulty.xml"], tally=tally))
    expected = [f"{b}/p/{i}" for i in range(100) if i != 70]
    expected[40] = f"{b}/p/40?a=1&b=2"
    assert urls == expected
    assert (tally.entries, tally.broken_entries, tally.sitemaps_read) == (99, 1, 1)
    assert tally.xml_faults >= 2
    assert f"{b}/faulty.xml: 1 broken entries skipped, {tally.xml_faults} XML faults" in (
        caplog.text
    )


async def test_a_fault_in_a_large_sitemap_loses_no_entry_of_its_chunk(
    site: Site, fetch: FetchFn
) -> None:
    b = site.base
    body = urlset([f"{b}/item/{i}" for i in range(5000)])  # ~390 KB: two 256 KiB chunks
    body = body.replace(f"{b}/item/2500 ".encode(), f"{b}/item/2500?x=<y ".encode())
    site.put("/large.xml", body)
    urls = await collect(sitemap_entries(fetch, [f"{b}/large.xml"]))
    assert len(urls) == 5000  # the stray < is read as text: a fault, the URL as written
    assert (urls[0], urls[2500], urls[-1]) == (
        f"{b}/item/0",
        f"{b}/item/2500?x=<y",
        f"{b}/item/4999",
    )


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be", "utf-16"])
async def test_utf16_sitemaps_are_read(site: Site, fetch: FetchFn, codec: str) -> None:
    b = site.base
    text = urlset([f"{b}/é/1", f"{b}/2"]).decode().replace("UTF-8", "UTF-16")
    site.put("/u16.xml", text.encode(codec))  # "utf-16": with a BOM; the others without
    index_text = index([f"{b}/u16.xml"]).decode()
    site.put("/index16.xml", codecs.BOM_UTF16_LE + index_text.encode("utf-16-le"))
    assert await collect(sitemap_entries(fetch, [f"{b}/index16.xml"])) == [f"{b}/é/1", f"{b}/2"]
    site.put("/misdeclared.xml", text.encode())  # says UTF-16, is UTF-8
    assert await collect(sitemap_entries(fetch, [f"{b}/misdeclared.xml"])) == [
        f"{b}/é/1",
        f"{b}/2",
    ]


BILLION_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + b"".join(
        f' <!ENTITY lol{n} "{f"&lol{n - 1};" * 10 if n > 1 else "&lol;" * 10}">\n'.encode()
        for n in range(1, 10)
    )
    + b"]>\n<urlset><url><loc>http://bomb.example/&lol9;</loc></url>"
)


async def test_billion_laughs_is_read_without_expanding(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/laughs.xml", BILLION_LAUGHS + f"<url><loc>{b}/after</loc></url></urlset>".encode())
    tally = SitemapTally()
    started = time.monotonic()
    urls = await collect(sitemap_entries(fetch, [f"{b}/laughs.xml"], tally=tally))
    assert urls == [f"{b}/after"]
    assert tally.broken_entries == 1
    assert time.monotonic() - started < 2.0  # 10⁹ "lol"s would take minutes and GBs


async def test_an_external_entity_is_never_fetched(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put("/secret", f"{b}/leaked".encode())
    site.put(
        "/xxe.xml",
        (
            f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "{b}/secret">'
            f'<!ENTITY % dtd SYSTEM "{b}/secret"> %dtd;]>'
            f"<urlset {NS}><url><loc>&xxe;</loc></url><url><loc>{b}/ok</loc></url></urlset>"
        ).encode(),
    )
    site.put(
        "/doctype.xml",
        b'<!DOCTYPE urlset SYSTEM "'
        + f"{b}/secret".encode()
        + b'">'
        + urlset([f"{b}/dt"]).split(b"?>", 1)[1],
    )
    urls = await collect(sitemap_entries(fetch, [f"{b}/xxe.xml", f"{b}/doctype.xml"]))
    assert urls == [f"{b}/ok", f"{b}/dt"]
    assert site.hits["/secret"] == 0


async def test_rss_and_atom_feeds_as_google_reads_them(site: Site, fetch: FetchFn) -> None:
    b = site.base
    site.put(
        "/feed.rss",
        (
            '<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel>'
            f"<title>News</title><link>{b}/</link>"
            f"<item><title>One</title><link>{b}/news/caf\xe9</link>"
            "<pubDate>Mon, 01 Jan 2024 10:00:00 GMT</pubDate></item>"
            f"<item><link> {b}/news/2 </link><guid>{b}/guid/2</guid></item>"
            "<item><title>no link</title></item>"
            "</channel></rss>"
        ).encode("latin-1"),
    )
    site.put(
        "/feed.atom",
        (
            '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f'<link rel="self" href="{b}/feed.atom"/><link href="{b}/"/>'
            f'<entry><link rel="edit" href="{b}/edit/1"/><link href="{b}/posts/1"/>'
            "<updated>2024-02-01T00:00:00Z</updated></entry>"
            f"<entry><link rel='alternate' type='text/html' href='{b}/posts/2?a=1&amp;b=2'/>"
            "</entry></feed>"
        ).encode(),
    )
    tally = SitemapTally()
    entries = [
        entry
        async for entry in sitemap_entries(fetch, [f"{b}/feed.rss", f"{b}/feed.atom"], tally=tally)
    ]
    assert [(e.url, e.lastmod) for e in entries] == [
        (f"{b}/news/café", 1704103200.0),
        (f"{b}/news/2", None),
        (f"{b}/posts/1", 1706745600.0),
        (f"{b}/posts/2?a=1&b=2", None),
    ]
    assert tally.broken_entries == 1


async def test_a_hostile_page_of_unclosed_tags_is_read_in_linear_time(
    site: Site, fetch: FetchFn
) -> None:
    b = site.base
    site.put("/tags.xml", b"<!doctype html><urlset>" + b"<p><br>x</i>" * 100_000 + b"</urlset>")
    tally = SitemapTally()
    started = time.monotonic()
    assert await collect(sitemap_entries(fetch, [f"{b}/tags.xml"], tally=tally)) == []
    assert time.monotonic() - started < 5.0
    assert tally.xml_faults > 100_000
    # Past the elements followed, an entry is broken (never a crash) unless it is read whole.
    deep = f"<url><lastmod>2024-01-01</lastmod><loc>{b}/deep</loc></url>".encode() * 2
    whole = f"<url><loc>{b}/whole</loc></url>".encode()
    site.put("/deep.xml", b"<urlset>" + b"<div>" * 70 + deep + whole)
    tally = SitemapTally()
    assert await collect(sitemap_entries(fetch, [f"{b}/deep.xml"], tally=tally)) == [f"{b}/whole"]
    assert tally.broken_entries == 2
