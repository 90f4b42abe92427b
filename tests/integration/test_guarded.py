"""The guarded demo host: header coherence, a ban per client address, a cookie challenge."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest

from crawlfleet.demosite import GUARDED, GuardRules, ThreadedDemoSite
from crawlfleet.fetchers.profiles import profile

CHROME = profile("chrome-131-linux").as_dict()


@pytest.fixture
def guarded() -> Iterator[ThreadedDemoSite]:
    rules = GuardRules(burst=1000, window_s=10, ban_s=30, bursts={"127.0.1.9": 3})
    with ThreadedDemoSite(addresses={GUARDED: "127.0.0.20"}, guard=rules) as demo:
        yield demo


@pytest.fixture
async def browser_like() -> AsyncIterator[aiohttp.ClientSession]:
    jar = aiohttp.CookieJar(unsafe=True)  # keeps cookies of IP hosts
    async with aiohttp.ClientSession(headers=CHROME, cookie_jar=jar) as session:
        yield session


async def test_a_client_with_a_cookie_jar_passes_the_challenge(
    guarded: ThreadedDemoSite, browser_like: aiohttp.ClientSession
) -> None:
    async with browser_like.get(guarded.url(GUARDED, "/page/3")) as response:
        assert response.status == 200
        assert "Guarded item 3" in await response.text()
    assert [(r.path, r.status) for r in guarded.log] == [("/page/3", 302), ("/page/3", 200)]
    assert {r.client for r in guarded.log} == {"127.0.0.1"}


async def test_a_client_without_cookies_never_gets_past_it(guarded: ThreadedDemoSite) -> None:
    async with aiohttp.ClientSession(headers=CHROME, cookie_jar=aiohttp.DummyCookieJar()) as plain:
        with pytest.raises(aiohttp.TooManyRedirects):
            await plain.get(guarded.url(GUARDED, "/page/1"), max_redirects=5)
    assert {r.status for r in guarded.log} == {302}


@pytest.mark.parametrize(
    "headers",
    [
        {"User-Agent": "Python/3.11 aiohttp/3.14.5"},
        {k: v for k, v in CHROME.items() if k != "sec-ch-ua"},
        {**profile("firefox-133-linux").as_dict(), "sec-ch-ua": CHROME["sec-ch-ua"]},
        {k: v for k, v in CHROME.items() if k != "Accept-Language"},
    ],
)
async def test_an_incoherent_header_set_is_forbidden(
    guarded: ThreadedDemoSite, headers: dict[str, str]
) -> None:
    url = guarded.url(GUARDED, "/")
    async with (
        aiohttp.ClientSession(skip_auto_headers=["User-Agent"]) as client,
        client.get(url, headers=headers) as response,
    ):
        assert response.status == 403


async def test_a_burst_bans_the_address_403_then_429_with_retry_after(
    guarded: ThreadedDemoSite,
) -> None:
    connector = aiohttp.TCPConnector(local_addr=("127.0.1.9", 0))
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(headers=CHROME, connector=connector, cookie_jar=jar) as c:
        statuses = []
        for _ in range(5):
            async with c.get(guarded.url(GUARDED, "/page/1"), allow_redirects=False) as response:
                statuses.append((response.status, response.headers.get("Retry-After")))
    # The challenge and two pages make the burst of three: the fourth request is banned.
    assert [s for s, _ in statuses] == [302, 200, 200, 403, 429]
    assert 1 <= int(statuses[-1][1] or 0) <= 30
    assert {r.client for r in guarded.log} == {"127.0.1.9"}
