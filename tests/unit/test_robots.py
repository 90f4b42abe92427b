"""RobotsCache against small aiohttp servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web

from crawlfleet.errors import BadUrl, ConfigError, FetchError
from crawlfleet.frontier.robots import FetchFn, RobotsCache, origin_of, product_token
from crawlfleet.models import FetchResult
from tests.fixtures.clock import FakeClock

UA = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"

ROBOTS = b"""\
User-agent: otherbot
Disallow: /

User-agent: crawlfleet
Disallow: /private/
Allow: /private/open
Crawl-delay: 2.5

User-agent: *
Disallow: /

Sitemap: http://127.0.0.1/sitemap_a.xml
Sitemap: http://127.0.0.1/sitemap_b.xml.gz
"""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Site:
    """A local server whose /robots.txt answer a test chooses; counts requests per path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.robots: Handler = self.robots_ok
        self.base = ""

    async def robots_ok(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=ROBOTS, content_type="text/plain")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits[request.path] += 1
        if request.path == "/robots.txt":
            return await self.robots(request)
        return web.Response(text="page")


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    state = Site()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    state.base = f"http://127.0.0.1:{port}"
    yield state
    await runner.cleanup()


@pytest.fixture
async def fetch() -> AsyncIterator[FetchFn]:
    """A minimal fetcher: any status is a result; no response is a FetchError."""
    timeout = aiohttp.ClientTimeout(total=0.3)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def get(url: str) -> FetchResult:
            started = time.monotonic()
            try:
                async with session.get(url) as response:
                    body = await response.read()
                    return FetchResult(
                        url=url,
                        final_url=str(response.url),
                        status=response.status,
                        headers={k.lower(): v for k, v in response.headers.items()},
                        body=body,
                        elapsed_s=time.monotonic() - started,
                        redirects=tuple(str(r.url) for r in response.history),
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise FetchError(f"{type(exc).__name__}: {exc}") from exc

        yield get


def make_cache(fetch: FetchFn, clock: FakeClock, **kwargs: int) -> RobotsCache:
    return RobotsCache(fetch, user_agent=UA, clock=clock, ttl_s=3600, error_ttl_s=600, **kwargs)


async def test_rules_crawl_delay_and_sitemaps(site: Site, fetch: FetchFn) -> None:
    cache = make_cache(fetch, FakeClock())
    allowed = await cache.check(f"{site.base}/public/page")
    assert allowed.allowed
    assert allowed.reason is None
    assert allowed.crawl_delay_s == 2.5
    denied = await cache.check(f"{site.base}/private/x")
    assert not denied.allowed
    assert denied.reason == "disallowed by robots.txt"
    assert denied.crawl_delay_s == 2.5
    assert (await cache.check(f"{site.base}/private/open")).allowed
    assert await cache.sitemaps(f"{site.base}/anything") == [
        "http://127.0.0.1/sitemap_a.xml",
        "http://127.0.0.1/sitemap_b.xml.gz",
    ]
    assert site.hits["/robots.txt"] == 1


async def test_other_user_agent_falls_back_to_star(site: Site, fetch: FetchFn) -> None:
    cache = RobotsCache(fetch, user_agent="Nobody/2.0", clock=FakeClock(), ttl_s=60, error_ttl_s=60)
    decision = await cache.check(f"{site.base}/public/page")
    assert not decision.allowed
    assert decision.crawl_delay_s is None


async def test_404_allows_everything(site: Site, fetch: FetchFn) -> None:
    async def missing(request: web.Request) -> web.StreamResponse:
        return web.Response(status=404, text="not found")

    site.robots = missing
    cache = make_cache(fetch, FakeClock())
    decision = await cache.check(f"{site.base}/private/x")
    assert decision.allowed
    assert await cache.sitemaps(site.base + "/") == []


async def test_503_disallows_until_error_ttl_then_retries(site: Site, fetch: FetchFn) -> None:
    async def unavailable(request: web.Request) -> web.StreamResponse:
        return web.Response(status=503, text="down")

    site.robots = unavailable
    clock = FakeClock()
    cache = make_cache(fetch, clock)
    decision = await cache.check(f"{site.base}/public/page")
    assert not decision.allowed
    assert decision.reason == "robots.txt unavailable (503)"
    clock.advance(599)
    assert not (await cache.check(f"{site.base}/public/page")).allowed
    assert site.hits["/robots.txt"] == 1
    site.robots = site.robots_ok
    clock.advance(2)
    assert (await cache.check(f"{site.base}/public/page")).allowed
    assert site.hits["/robots.txt"] == 2


async def test_error_after_success_keeps_the_stale_copy(site: Site, fetch: FetchFn) -> None:
    async def unavailable(request: web.Request) -> web.StreamResponse:
        return web.Response(status=500)

    clock = FakeClock()
    cache = make_cache(fetch, clock)
    assert (await cache.check(f"{site.base}/public/page")).allowed
    site.robots = unavailable
    clock.advance(3601)
    assert (await cache.check(f"{site.base}/public/page")).allowed
    assert not (await cache.check(f"{site.base}/private/x")).allowed
    assert site.hits["/robots.txt"] == 2


async def test_hang_times_out_as_unavailable(site: Site, fetch: FetchFn) -> None:
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await release.wait()
        return web.Response(text="")

    site.robots = hang
    cache = make_cache(fetch, FakeClock())
    decision = await cache.check(f"{site.base}/public/page")
    release.set()
    assert not decision.allowed
    assert decision.reason is not None
    assert decision.reason.startswith("robots.txt unavailable (")


async def test_connection_refused_is_unavailable(fetch: FetchFn) -> None:
    cache = make_cache(fetch, FakeClock())
    decision = await cache.check("http://127.0.0.1:9/page")
    assert not decision.allowed


async def test_large_robots_is_truncated(site: Site, fetch: FetchFn) -> None:
    filler = b"# padding padding padding padding padding padding padding padding\n" * 32_000
    body = b"User-agent: *\nDisallow: /early/\n" + filler + b"Disallow: /late/\n"
    assert len(body) > 2_000_000

    async def huge(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/plain")

    site.robots = huge
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/early/x")).allowed
    assert (await cache.check(f"{site.base}/late/x")).allowed


async def test_truncation_drops_the_cut_line(site: Site, fetch: FetchFn) -> None:
    body = b"User-agent: *\nDisallow: /abc/def\n"

    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/plain")

    site.robots = robots
    cache = make_cache(fetch, FakeClock(), max_bytes=len(body) - 5)
    # "Disallow: /abc" would block /abc/zzz; the cut rule is dropped instead.
    assert (await cache.check(f"{site.base}/abc/zzz")).allowed


async def test_redirected_robots_is_used(site: Site, fetch: FetchFn) -> None:
    async def moved(request: web.Request) -> web.StreamResponse:
        if request.query.get("real"):
            return web.Response(body=b"User-agent: *\nDisallow: /x\n", content_type="text/plain")
        raise web.HTTPFound("/robots.txt?real=1")

    site.robots = moved
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/x")).allowed
    assert (await cache.check(f"{site.base}/y")).allowed


async def test_concurrent_checks_share_one_fetch(site: Site, fetch: FetchFn) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(body=ROBOTS, content_type="text/plain")

    site.robots = slow
    cache = make_cache(fetch, FakeClock())
    urls = [f"{site.base}/{'private' if i % 2 else 'public'}/{i}" for i in range(20)]
    decisions = await asyncio.gather(*(cache.check(u) for u in urls))
    assert [d.allowed for d in decisions] == [i % 2 == 0 for i in range(20)]
    assert site.hits["/robots.txt"] == 1


async def test_cancelled_waiter_does_not_cancel_the_shared_fetch(
    site: Site, fetch: FetchFn
) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.05)
        return web.Response(body=ROBOTS, content_type="text/plain")

    site.robots = slow
    cache = make_cache(fetch, FakeClock())
    first = asyncio.ensure_future(cache.check(f"{site.base}/public/1"))
    second = asyncio.ensure_future(cache.check(f"{site.base}/public/2"))
    await asyncio.sleep(0.01)
    first.cancel()
    assert (await second).allowed
    with pytest.raises(asyncio.CancelledError):
        await first
    assert site.hits["/robots.txt"] == 1


async def test_ttl_expiry_refetches(site: Site, fetch: FetchFn) -> None:
    clock = FakeClock()
    cache = make_cache(fetch, clock)
    await cache.check(f"{site.base}/public/1")
    clock.advance(3599)
    await cache.check(f"{site.base}/public/2")
    assert site.hits["/robots.txt"] == 1
    clock.advance(2)
    await cache.check(f"{site.base}/public/3")
    assert site.hits["/robots.txt"] == 2


async def test_lru_bounds_the_number_of_hosts(site: Site, fetch: FetchFn) -> None:
    cache = make_cache(fetch, FakeClock(), max_hosts=1)
    port = site.base.rsplit(":", 1)[1]
    other = f"http://localhost:{port}"
    await cache.check(f"{site.base}/public/1")
    await cache.check(f"{other}/public/1")
    await cache.check(f"{site.base}/public/2")
    assert site.hits["/robots.txt"] == 3


async def test_file_urls_are_always_allowed(fetch: FetchFn) -> None:
    cache = make_cache(fetch, FakeClock())
    assert (await cache.check("file:///etc/hosts")).allowed
    assert await cache.sitemaps("file:///etc/hosts") == []
    with pytest.raises(BadUrl):
        await cache.check("ftp://example.com/x")


def test_product_token() -> None:
    assert product_token(UA) == "crawlfleet"
    assert product_token("MyBot") == "mybot"
    assert product_token("crawlfleet-examples/0.1 (quotes)") == "crawlfleet-examples"
    assert product_token("Mozilla/5.0 (compatible; crawlfleet/0.1)") == "crawlfleet"
    googlebot_chrome = (
        "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; Googlebot/2.1; "
        "+http://www.google.com/bot.html) Chrome/120.0 Safari/537.36"
    )
    assert product_token(googlebot_chrome) == "googlebot"
    assert product_token("Mozilla/5.0 (X11)", "Shop_Bot") == "shop_bot"


def test_a_browser_user_agent_without_a_crawler_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="robots_token"):
        product_token("Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36")
    with pytest.raises(ConfigError, match="robots_token"):
        product_token(UA, "crawlfleet/1.0")


def serve(site: Site, body: bytes) -> None:
    async def robots(request: web.Request) -> web.StreamResponse:
        return web.Response(body=body, content_type="text/plain")

    site.robots = robots


async def test_a_byte_order_mark_keeps_the_first_group(site: Site, fetch: FetchFn) -> None:
    serve(site, b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n")
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/private/x")).allowed
    assert (await cache.check(f"{site.base}/public/x")).allowed


@pytest.mark.parametrize("name", ["crawlfleet/1.0", "crawlfleet bot", "CrawlFleet"])
async def test_a_group_is_ours_up_to_its_first_odd_character(
    site: Site, fetch: FetchFn, name: str
) -> None:
    serve(site, f"User-agent: {name}\nDisallow: /x\n\nUser-agent: *\nDisallow: /y\n".encode())
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/x")).allowed
    assert (await cache.check(f"{site.base}/y")).allowed


async def test_a_browser_like_user_agent_answers_to_its_crawler_name(
    site: Site, fetch: FetchFn
) -> None:
    serve(site, b"User-agent: crawlfleet\nDisallow: /x\n\nUser-agent: mozilla\nDisallow: /y\n")
    ua = "Mozilla/5.0 (compatible; crawlfleet/0.1)"
    cache = RobotsCache(fetch, user_agent=ua, clock=FakeClock(), ttl_s=60, error_ttl_s=60)
    assert not (await cache.check(f"{site.base}/x")).allowed
    assert (await cache.check(f"{site.base}/y")).allowed


async def test_robots_token_overrides_the_user_agent(site: Site, fetch: FetchFn) -> None:
    serve(site, b"User-agent: crawlfleet\nDisallow: /x\n\nUser-agent: shopbot\nDisallow: /y\n")
    cache = RobotsCache(
        fetch, user_agent=UA, robots_token="ShopBot", clock=FakeClock(), ttl_s=60, error_ttl_s=60
    )
    assert (await cache.check(f"{site.base}/x")).allowed
    assert not (await cache.check(f"{site.base}/y")).allowed


async def test_an_unknown_line_does_not_split_a_group(site: Site, fetch: FetchFn) -> None:
    serve(site, b"User-agent: crawlfleet\nX-Unknown: 1\nUser-agent: otherbot\nDisallow: /x\n")
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/x/page")).allowed


async def test_a_crawl_delay_line_does_not_split_a_group(site: Site, fetch: FetchFn) -> None:
    serve(site, b"User-agent: crawlfleet\nCrawl-delay: 4\nUser-agent: otherbot\nDisallow: /x\n")
    decision = await make_cache(fetch, FakeClock()).check(f"{site.base}/x/page")
    assert not decision.allowed
    assert decision.crawl_delay_s == 4.0


async def test_rules_match_the_url_as_it_will_be_requested(site: Site, fetch: FetchFn) -> None:
    serve(site, b"User-agent: *\nDisallow: /list?page=\n")
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/list?page=2&cat=a")).allowed
    assert (await cache.check(f"{site.base}/list?cat=a&page=2")).allowed  # never reordered


async def test_an_escape_is_not_the_character_it_escapes(site: Site, fetch: FetchFn) -> None:
    # Google: "/a/baz" is not "/a/%62%61%7A"; protego decoded both and allowed it.
    serve(site, b"User-agent: *\nDisallow: /\nAllow: /a/%62%61%7A\n")
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/a/baz")).allowed
    assert (await cache.check(f"{site.base}/a/%62%61%7a")).allowed


async def test_five_redirects_are_followed_across_hosts(site: Site, fetch: FetchFn) -> None:
    port = site.base.rsplit(":", 1)[1]

    async def chain(request: web.Request) -> web.StreamResponse:
        hop = int(request.query.get("hop", "0"))
        if hop < 5:  # 127.0.0.1 and localhost in turn: another authority each hop
            host = "localhost" if hop % 2 == 0 else "127.0.0.1"
            raise web.HTTPFound(f"http://{host}:{port}/robots.txt?hop={hop + 1}")
        return web.Response(body=b"User-agent: *\nDisallow: /x\n", content_type="text/plain")

    site.robots = chain
    cache = make_cache(fetch, FakeClock())
    assert not (await cache.check(f"{site.base}/x")).allowed
    assert site.hits["/robots.txt"] == 6


def test_origin_of() -> None:
    assert origin_of("HTTP://Example.COM:80/a?b") == "http://example.com"
    assert origin_of("https://example.com:8443/") == "https://example.com:8443"
    assert origin_of("http://user:pw@[::1]:8080/x") == "http://[::1]:8080"
    with pytest.raises(BadUrl):
        origin_of("http://example.com:99999/")


async def test_429_is_unavailable(site: Site, fetch: FetchFn) -> None:
    async def busy(request: web.Request) -> web.StreamResponse:
        return web.Response(status=429)

    site.robots = busy
    decision = await make_cache(fetch, FakeClock()).check(f"{site.base}/public/page")
    assert not decision.allowed
    assert decision.reason == "robots.txt unavailable (429)"


async def test_request_rate_gives_a_crawl_delay(site: Site, fetch: FetchFn) -> None:
    async def rate(request: web.Request) -> web.StreamResponse:
        return web.Response(body=b"User-agent: *\nRequest-rate: 2/10s\n", content_type="text/plain")

    site.robots = rate
    decision = await make_cache(fetch, FakeClock()).check(f"{site.base}/page")
    assert decision.allowed
    assert decision.crawl_delay_s == 5.0
