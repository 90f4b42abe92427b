"""The crawl-session link over its in-memory twins: what a browser fetcher gets, the strategy."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from aiohttp import web

from crawlfleet.errors import BrowserFault, FetchError
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.profiles import PROFILES
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.proxies.endpoints import build_tiers
from crawlfleet.proxies.memory import MemoryProxyStates
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.proxies.protocols import Cooldown
from crawlfleet.runtime.fetching.proxy_link import SessionFetcher, proxy_refused
from crawlfleet.runtime.fetching.session_pool import SessionOptions, SessionPool
from crawlfleet.sessions.memory import MemorySessionStore
from tests.fixtures.clock import FakeClock
from tests.fixtures.loopback import serve

T0 = 1_000_000.0
SECRET = "Sup3r-secret"


class Slot:
    """A strategy slot in a dict (the frontier's stands behind it in a crawl)."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, str]] = {}

    async def read(self, domain: str) -> Mapping[str, str]:
        return dict(self.values.get(domain, {}))

    async def write(self, domain: str, strategy: Mapping[str, str]) -> None:
        self.values[domain] = dict(strategy)


def link(tiers: list[list[str]], slot: Slot, clock: FakeClock) -> SessionFetcher:
    config = SessionOptions(sessions_per_domain=2)
    pool = ProxyPool(build_tiers(tiers), MemoryProxyStates(), clock, cooldown=Cooldown(30, 60))
    http = HttpFetcher(FetchOptions(), clock=clock)
    sessions = SessionPool(pool, MemorySessionStore(), slot, clock, config)
    return SessionFetcher(http, pool, sessions, clock, config)


async def test_a_browser_gets_the_sessions_ua_proxy_and_cookies_by_turn() -> None:
    clock, slot = FakeClock(T0), Slot()
    fetcher = link([["direct"], [f"http://u:{SECRET}@127.0.0.1:8902"]], slot, clock)
    first = await fetcher.identity("shop.example")
    assert (first.proxy, first.proxy_auth, first.route.tier) == (None, None, 0)
    assert first.user_agent in {p.user_agent for p in PROFILES.values()}
    assert first.headers["User-Agent"] == first.user_agent
    await slot.write("shop.example", {"tier": "1", "fetcher": "browser"})
    clock.advance(2)  # past the link's strategy cache
    second = await fetcher.identity("shop.example")
    assert (second.proxy, second.proxy_auth) == ("http://127.0.0.1:8902", ("u", SECRET))
    assert second.route.tier == 1
    assert SECRET not in repr(second)


async def test_a_larger_session_epoch_retires_every_session() -> None:
    clock, slot = FakeClock(T0), Slot()
    fetcher = link([["direct"]], slot, clock)
    before = {(await fetcher.identity("a.example")).route.session_id for _ in range(4)}
    assert len(before) == 2  # sessions_per_domain, used in turn
    await slot.write("a.example", {"session_epoch": "1"})
    clock.advance(2)
    after = {(await fetcher.identity("a.example")).route.session_id for _ in range(4)}
    assert len(after) == 2
    assert not before & after


def test_a_refused_proxy_login_is_told_from_a_sites_401() -> None:
    def result(status: int, challenge: str) -> FetchResult:
        headers = {"www-authenticate": challenge} if challenge else {}
        return FetchResult("http://a/", "http://a/", status, headers, b"", 0.0)

    assert proxy_refused(result(407, ""))
    assert proxy_refused(result(401, 'Basic realm="Tinyproxy"'))
    assert not proxy_refused(result(401, 'Basic realm="Members"'))
    assert not proxy_refused(result(403, ""))


async def test_a_session_retired_while_a_fetch_is_in_flight_is_not_stored_again() -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        response = web.Response(text="<html><body>ok</body></html>", content_type="text/html")
        response.set_cookie("late", "1")
        return response

    async def blocked(request: web.Request) -> web.Response:
        return web.Response(status=403, text="no")

    app = web.Application()
    app.add_routes([web.get("/slow", slow), web.get("/blocked", blocked)])
    clock, slot = FakeClock(T0), Slot()
    config = SessionOptions(sessions_per_domain=1)
    pool = ProxyPool(build_tiers([["direct"]]), MemoryProxyStates(), clock, cooldown=Cooldown(1, 1))
    store = MemorySessionStore()
    http = HttpFetcher(
        FetchOptions(allow_private_addresses=True), clock=clock, follow_redirects=False
    )
    fetcher = SessionFetcher(
        http, pool, SessionPool(pool, store, slot, clock, config), clock, config
    )
    try:
        async with serve(app) as base:
            in_flight = asyncio.create_task(fetcher.fetch(request(f"{base}/slow")))
            await asyncio.sleep(0.2)  # the slow fetch holds the domain's only session
            (first,) = await store.crawl_sessions("127.0.0.1")
            blocked_result = await fetcher.fetch(request(f"{base}/blocked"))
            assert blocked_result.status == 403  # ...and that session is retired
            release.set()
            assert (await in_flight).status == 200
    finally:
        await fetcher.close()
    assert first.id not in {s.id for s in await store.crawl_sessions("127.0.0.1")}


def request(url: str) -> CrawlRequest:
    return CrawlRequest(url, url, "127.0.0.1")


async def test_only_the_call_that_quarantines_a_proxy_says_so() -> None:
    clock, states = FakeClock(T0), MemoryProxyStates()
    tiers = build_tiers([["http://127.0.0.1:8901"]])
    one = ProxyPool(tiers, states, clock, cooldown=Cooldown(30, 60))
    other = ProxyPool(tiers, states, clock, cooldown=Cooldown(30, 60))
    (endpoint,) = tiers[0]
    state, began = await one.penalize(endpoint, error=False, quarantine=True)
    assert began
    assert state.quarantined_until == T0 + 30
    clock.advance(0.5)
    again, began_again = await other.penalize(endpoint, error=False, quarantine=True)
    assert not began_again  # the other process's answer arrived after the quarantine began
    assert again.quarantined_until == T0 + 30
    assert not await other.usable(endpoint.id)


class BrowserTwin:
    """A ``ViaFetcher`` keeping the jar itself, as the browser does: records what it was
    given, answers with a cookie its page set, or fails as the browser may."""

    def __init__(self, fault: Exception | None = None) -> None:
        self.fault = fault
        self.sent: list[tuple[CrawlRequest, Via | None]] = []

    async def fetch(self, request: CrawlRequest, *, via: Via | None = None) -> FetchResult:
        self.sent.append((request, via))
        if self.fault is not None:
            raise self.fault
        jar = {**(via.cookies if via is not None else {}), "set_by_script": "1"}
        body = b"<html><body>ok</body></html>"
        result = FetchResult(request.url, request.url, 200, {}, body, 0.01, fetcher="browser")
        result.cookies = jar
        return result

    async def close(self) -> None:
        return None


def browser_link(twin: BrowserTwin, tiers: list[list[str]]) -> tuple[SessionFetcher, ProxyPool]:
    clock, config = FakeClock(T0), SessionOptions(sessions_per_domain=1)
    pool = ProxyPool(build_tiers(tiers), MemoryProxyStates(), clock, cooldown=Cooldown(30, 60))
    sessions = SessionPool(pool, MemorySessionStore(), Slot(), clock, config)
    return SessionFetcher(twin, pool, sessions, clock, config, own_jar=True), pool


async def test_a_fetcher_keeping_its_jar_gets_it_in_via_and_hands_it_back() -> None:
    twin = BrowserTwin()
    fetcher, _ = browser_link(twin, [[f"http://u:{SECRET}@127.0.0.1:8903"]])
    first = await fetcher.fetch(request("http://127.0.0.1/a"))
    await fetcher.fetch(request("http://127.0.0.1/b"))
    (_, via_a), (sent_b, via_b) = twin.sent
    assert via_a is not None
    assert via_b is not None
    assert first.route is not None
    assert (via_a.proxy, via_a.proxy_auth) == ("http://127.0.0.1:8903", ("u", SECRET))
    assert via_a.session == via_b.session == first.route.session_id
    assert dict(via_a.cookies) == {}
    assert dict(via_b.cookies) == {"set_by_script": "1"}  # kept from the first page
    assert "Cookie" not in sent_b.headers  # the jar goes in via, not as a header


async def test_a_browser_crash_through_a_proxy_does_not_quarantine_it() -> None:
    twin = BrowserTwin(BrowserFault("browser page crashed or closed"))
    fetcher, pool = browser_link(twin, [["http://127.0.0.1:8904"]])
    with pytest.raises(BrowserFault):
        await fetcher.fetch(request("http://127.0.0.1/a"))
    assert await pool.usable(pool.tiers[0][0].id)
    twin.fault = FetchError("net::ERR_PROXY_CONNECTION_FAILED")
    with pytest.raises(FetchError):
        await fetcher.fetch(request("http://127.0.0.1/b"))
    assert not await pool.usable(pool.tiers[0][0].id)
