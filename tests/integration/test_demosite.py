"""The demo site over real loopback sockets: content, statuses, hazards and the access log."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import os
import re
import signal
import sys
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import aiohttp
import brotli
import pytest
from selectolax.lexbor import LexborHTMLParser as HTMLParser

from crawlfleet.demosite import (
    AUTHORS,
    DEFAULT_ADDRESSES,
    GUARDED,
    PRODUCTS,
    QUOTES,
    ROLES,
    DemoSite,
    ThreadedDemoSite,
    gaps_s,
    read_access_log,
)
from crawlfleet.demosite.hazards import BOMB_SIZE_MIB
from crawlfleet.demosite.lab import HOME_LINKS, SITEMAP_ONLY_PATHS
from tests.fixtures.testsite import LoggedSite

MIB = 1024 * 1024


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(headers={"User-Agent": "demosite-test/1"}) as session:
        yield session


async def get_text(client: aiohttp.ClientSession, url: str) -> str:
    async with client.get(url) as response:
        assert response.status == 200, url
        return await response.text()


def hrefs(html: str, selector: str = "a") -> list[str]:
    return [node.attributes.get("href") or "" for node in HTMLParser(html).css(selector)]


def paths(site: ThreadedDemoSite, role: str) -> list[str]:
    return [record.path for record in site.log if record.role == role]


async def test_every_role_answers_on_its_own_address_at_one_port(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    open_roles = [role for role in ROLES if role != GUARDED]  # its own tests: test_guarded
    for role in open_roles:
        url = site.url(role, "/")
        assert urlsplit(url).hostname == DEFAULT_ADDRESSES[role]
        assert urlsplit(url).port == site.port
        await get_text(client, url)
    assert [(r.role, r.address, r.path, r.status) for r in site.log] == [
        (role, DEFAULT_ADDRESSES[role], "/", 200) for role in open_roles
    ]
    assert {r.user_agent for r in site.log} == {"demosite-test/1"}


async def test_shop_catalogue_pages_link_exactly_the_products(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    found: list[str] = []
    url: str | None = site.url("shop", "/catalogue/page-1.html")
    while url is not None:
        html = await get_text(client, url)
        found += [urlsplit(urljoin(url, h)).path for h in hrefs(html, "article.product_pod h3 a")]
        nxt = hrefs(html, "li.next a")
        url = urljoin(url, nxt[0]) if nxt else None
    assert found == [p.url_path for p in PRODUCTS]
    assert paths(site, "shop")[-1] == "/catalogue/page-5.html"
    async with client.get(site.url("shop", "/catalogue/page-6.html")) as response:
        assert response.status == 404


async def test_shop_product_page_shows_id_name_and_price(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    for product in (PRODUCTS[0], PRODUCTS[6], PRODUCTS[-1]):
        tree = HTMLParser(await get_text(client, site.url("shop", product.url_path)))
        article = tree.css_first("article.product")
        assert article is not None
        assert article.attributes["data-product_id"] == str(product.id)
        assert article.css_first("h1").text() == product.name  # type: ignore[union-attr]
        price = article.css_first("p.price_color").text()  # type: ignore[union-attr]
        assert price == product.price_text
        assert float(price.removeprefix("£")) == product.price_gbp
    assert PRODUCTS[6].availability == "Out of stock"
    lab_links = [h for h in hrefs(await get_text(client, site.url("shop"))) if "127.0.0.4" in h]
    assert lab_links == [site.url("lab", "/")]


async def test_quotes_pages_hold_every_quote_and_link_author_pages(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    seen: list[tuple[str, str, tuple[str, ...]]] = []
    author_links: set[str] = set()
    for number in range(1, 6):
        tree = HTMLParser(await get_text(client, site.url("quotes", f"/page/{number}/")))
        for quote in tree.css("div.quote"):
            text = quote.css_first(".text").text().strip("“”")  # type: ignore[union-attr]
            author = quote.css_first(".author").text()  # type: ignore[union-attr]
            tags = tuple(a.text() for a in quote.css(".tags a.tag"))
            seen.append((text, author, tags))
            author_links.update(a.attributes["href"] or "" for a in quote.css("span a"))
        assert bool(tree.css("li.next a")) == (number < 5)
    assert seen == [(q.text, q.author, q.tags) for q in QUOTES]
    assert author_links == {a.url_path for a in AUTHORS}
    author = AUTHORS[3]
    tree = HTMLParser(await get_text(client, site.url("quotes", author.url_path)))
    assert tree.css_first("h3.author-title").text() == author.name  # type: ignore[union-attr]
    assert tree.css_first(".author-born-date").text() == author.born_date  # type: ignore[union-attr]


async def test_lab_robots_and_sitemaps_reach_sitemap_only_pages(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    robots = await get_text(client, site.url("lab", "/robots.txt"))
    assert "Disallow: /private/" in robots
    assert f"Sitemap: {site.url('lab', '/sitemap.xml')}" in robots
    index = await get_text(client, site.url("lab", "/sitemap.xml"))
    assert site.url("lab", "/sitemap-more.xml.gz") in index
    async with client.get(site.url("lab", "/sitemap-more.xml.gz")) as response:
        assert response.content_type == "application/gzip"
        assert "Content-Encoding" not in response.headers
        more = gzip.decompress(await response.read()).decode()
    listed = await get_text(client, site.url("lab", "/sitemap-pages.xml")) + more
    for path in SITEMAP_ONLY_PATHS:
        assert f"<loc>{site.url('lab', path)}</loc>" in listed
        await get_text(client, site.url("lab", path))
    home = await get_text(client, site.url("lab", "/"))
    linked = hrefs(home)
    assert set(HOME_LINKS) <= set(linked)
    assert not any(
        h.startswith(("/from-sitemap", "/hazards", "/hang", "/bomb", "/trap")) for h in linked
    )


async def test_redirects_chain_loop_and_to_a_linked_page(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    async with client.get(site.url("lab", "/redirect/chain/3")) as response:
        assert response.status == 200
        assert [r.status for r in response.history] == [302, 302, 302]
    async with client.get(site.url("lab", "/redirect/chain/2?status=308")) as response:
        assert [r.status for r in response.history] == [308, 308]
    with pytest.raises(aiohttp.TooManyRedirects):
        await client.get(site.url("lab", "/redirect/loop"), max_redirects=5)
    async with client.get(
        site.url("lab", "/redirect/to-linked"), allow_redirects=False
    ) as response:
        assert response.status == 301
        assert response.headers["Location"] == "/redirect/target"
    assert paths(site, "lab")[:4] == [f"/redirect/chain/{n}" for n in (3, 2, 1, 0)]


@pytest.mark.parametrize(
    ("path", "status", "retry_after"),
    [
        ("/status/404", 404, None),
        ("/status/410", 410, None),
        ("/status/500", 500, None),
        ("/status/503", 503, "1"),
        ("/status/429?retry_after=7", 429, "7"),
        ("/private/secret", 200, None),
    ],
)
async def test_status_pages(
    site: ThreadedDemoSite,
    client: aiohttp.ClientSession,
    path: str,
    status: int,
    retry_after: str | None,
) -> None:
    async with client.get(site.url("lab", path)) as response:
        assert response.status == status
        assert response.headers.get("Retry-After") == retry_after
    assert [(r.path, r.status) for r in site.log] == [(path, status)]


async def test_robots_variants(site: ThreadedDemoSite, client: aiohttp.ClientSession) -> None:
    statuses = {}
    for role in ("robots-5xx", "robots-404", "slow-robots"):
        async with client.get(site.url(role, "/robots.txt")) as response:
            statuses[role] = response.status
        await get_text(client, site.url(role, "/page/3"))
    assert statuses == {"robots-5xx": 503, "robots-404": 404, "slow-robots": 200}
    assert "Crawl-delay: 2\n" in await get_text(client, site.url("slow-robots", "/robots.txt"))


async def test_flaky_fails_n_times_per_name_until_reset(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    async def statuses(name: str, count: int) -> list[int]:
        result = []
        for _ in range(count):
            async with client.get(site.url("lab", f"/flaky/{name}?fail=2")) as response:
                result.append(response.status)
        return result

    assert await statuses("a", 3) == [500, 500, 200]
    assert await statuses("b", 1) == [500]
    site.reset_flaky()
    assert await statuses("a", 1) == [500]


async def test_slow_body_arrives_after_the_delay(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    started = time.monotonic()
    async with client.get(site.url("lab", "/slow?delay_ms=200")) as response:
        headers_s = time.monotonic() - started
        assert "Slow page" in await response.text()
    assert time.monotonic() - started - headers_s >= 0.15


async def test_hang_times_out_and_is_logged_as_client_closed(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    with pytest.raises(asyncio.TimeoutError):
        await client.get(site.url("lab", "/hang"), timeout=aiohttp.ClientTimeout(total=0.2))
    for _ in range(50):
        if site.log and site.log[0].status:
            break
        await asyncio.sleep(0.02)
    assert [(r.path, r.status) for r in site.log] == [("/hang", 499)]


async def test_big_bodies(site: ThreadedDemoSite, client: aiohttp.ClientSession) -> None:
    async with client.get(site.url("lab", "/big?kib=100")) as response:
        assert len(await response.read()) == 100 * 1024
    async with client.get(site.url("lab", "/big-declared")) as response:
        assert response.content_length == 64 * MIB
        assert len(await response.content.read(1000)) > 0
        response.close()


async def test_compression_bombs_are_small_on_the_wire(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    async with client.get(site.url("lab", "/bomb"), auto_decompress=False) as response:
        assert response.headers["Content-Encoding"] == "gzip"
        wire = await response.read()
    assert len(wire) < 200 * 1024
    inflater = zlib.decompressobj(31)
    inflated = 0
    for start in range(0, len(wire), 4096):
        inflated += len(inflater.decompress(wire[start : start + 4096]))
    assert inflated == BOMB_SIZE_MIB * MIB
    async with client.get(site.url("lab", "/bomb-br"), auto_decompress=False) as response:
        assert response.headers["Content-Encoding"] == "br"
        wire = await response.read()
    assert len(wire) < 4096
    assert len(brotli.decompress(wire)) == BOMB_SIZE_MIB * MIB


async def test_calendar_trap_links_onwards_forever(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    url = site.url("lab", "/trap/calendar/2024/12")
    for _ in range(3):
        links = hrefs(await get_text(client, url))
        url = site.url("lab", links[-1])
    assert links == ["/trap/calendar/2025/01", "/trap/calendar/2025/03"]


async def test_link_edge_case_pages(site: ThreadedDemoSite, client: aiohttp.ClientSession) -> None:
    nofollow = HTMLParser(await get_text(client, site.url("lab", "/nofollow")))
    rels = {a.attributes["href"]: a.attributes.get("rel") for a in nofollow.css("a")}
    assert rels == {
        "/nofollow/followed-1": None,
        "/nofollow/followed-2": None,
        "/nofollow/hidden-1": "nofollow",
        "/nofollow/hidden-2": "noopener nofollow",
    }
    assert '<meta name="robots" content="nofollow">' in await get_text(
        client, site.url("lab", "/meta-nofollow")
    )
    assert '<base href="/sub/dir/">' in await get_text(client, site.url("lab", "/base-href"))
    for target in ("/sub/dir/a.html", "/sub/b.html"):
        await get_text(client, site.url("lab", target))
    async with client.get(site.url("lab", "/bad-utf8")) as response:
        body = await response.read()
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    async with client.get(site.url("lab", "/binary.pdf")) as response:
        assert response.content_type == "application/pdf"
        assert (await response.read()).startswith(b"%PDF-")
    broken = await get_text(client, site.url("lab", "/broken-html"))
    assert hrefs(broken) == [f"/page/{n}" for n in (6, 7, 8)]


async def test_pages_are_deterministic(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    for role, path in (("shop", "/catalogue/page-3.html"), ("quotes", "/tag/hope/"), ("lab", "/")):
        first, second = [await get_text(client, site.url(role, path)) for _ in range(2)]
        assert first == second


async def test_access_log_times_and_clear(
    site: ThreadedDemoSite, client: aiohttp.ClientSession
) -> None:
    for n in (1, 2, 3):
        await get_text(client, site.url("lab", f"/page/{n}"))
    log = site.log
    assert [r.path for r in log] == ["/page/1", "/page/2", "/page/3"]
    assert all(a.monotonic_s <= b.monotonic_s for a, b in itertools.pairwise(log))
    assert gaps_s(log, "lab") == [b.monotonic_s - a.monotonic_s for a, b in itertools.pairwise(log)]
    assert gaps_s(log, "shop") == []
    assert all(abs(r.wall_s - time.time()) < 60 for r in log)
    site.clear_log()
    assert site.log == []


async def test_access_log_file_matches_memory(
    site_access_log: LoggedSite, client: aiohttp.ClientSession
) -> None:
    demo = site_access_log.site
    await get_text(client, demo.url("quotes", "/page/1/?x=1"))
    async with client.get(demo.url("shop", "/nope")) as response:
        assert response.status == 404
    assert read_access_log(site_access_log.path) == demo.log
    assert [(r.path, r.status) for r in demo.log] == [("/page/1/?x=1", 200), ("/nope", 404)]


async def test_demo_site_in_the_running_loop_with_chosen_roles(tmp_path: Path) -> None:
    demo = DemoSite(addresses={"lab": "127.0.0.9", "shop": "127.0.0.10"}, crawl_delay_s=0.5)
    await demo.start()
    port = demo.port
    try:
        with pytest.raises(OSError, match="cannot bind"):
            await DemoSite(port=demo.port, addresses={"lab": "127.0.0.9"}).start()
        with pytest.raises(KeyError):
            demo.url("quotes")
        async with aiohttp.ClientSession() as session:
            await get_text(session, demo.url("shop", "/"))
        assert [r.address for r in demo.log] == ["127.0.0.10"]
    finally:
        await demo.stop()
    again = DemoSite(port=port, addresses={"lab": "127.0.0.9"})
    await again.start()
    try:
        assert again.url("lab", "/x") == f"http://127.0.0.9:{port}/x"
    finally:
        await again.stop()
    with pytest.raises(ValueError, match="unknown demo site roles"):
        DemoSite(addresses={"nope": "127.0.0.11"})


CLI_SCRIPT = (  # a second command keeps demo-site a named subcommand
    "import typer; from crawlfleet.cli.demo_site import register; app = typer.Typer(); "
    "register(app); app.command('other')(lambda: None); app()"
)


async def test_demo_site_command_serves_until_interrupted() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CLI_SCRIPT,
        "demo-site",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert process.stdout is not None
    try:
        shop_url = None
        while shop_url is None:
            line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
            assert line, "the command exited before printing the shop URL"
            match = re.search(r"http://127\.0\.0\.2:\d+/", line)
            shop_url = match.group(0) if match else None
        async with aiohttp.ClientSession() as session:
            assert "Demo Shop" in await get_text(session, shop_url)
        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 10) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
