"""The browser through crawl sessions, and robots.txt through the crawl's proxies.

Real tinyproxy processes, each binding its outgoing connections to its own 127.0.1.x address
(the demo site's access log names the proxy of every request), Debian's Chromium, the demo
site's jsapp host (pages rendered by script, a cookie challenge only a browser passes).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

import crawlfleet
from crawlfleet.clock import SystemClock
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import CHALLENGE_COOKIE
from crawlfleet.fetchers.credentials import Credentials
from crawlfleet.fetchers.profiles import user_agent
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.proxies.endpoints import build_tiers
from crawlfleet.runtime.fetcher_wiring import build_robots
from crawlfleet.runtime.fetching.chain import session_link
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.sessions.cookies import CookieJar
from crawlfleet.settings import Settings
from crawlfleet.settings.proxies import ProxySettings
from tests.fixtures.tinyproxy import ProxyFarm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JSAPP_PARSERS = EXAMPLES / "jsapp" / "parsers.py"
PASSWORD = "Br0wser-pr0xy-4417"
PROFILE = "chrome-131-linux"
PAGES = 8


@pytest.mark.browser
@pytest.mark.slow
async def test_the_browser_fetches_through_the_sessions_proxies_ua_and_jar(
    site: ThreadedDemoSite,
    tmp_path: Path,
    proxies: ProxyFarm,
    caplog: pytest.LogCaptureFixture,
) -> None:
    plain = proxies.start("127.0.1.41")
    with_auth = proxies.start("127.0.1.42", auth=("crawler", PASSWORD))
    closed = proxies.closed()
    state = tmp_path / "state"
    settings = crawlfleet.load_settings(
        seeds=[site.url("jsapp", "/challenge/"), site.url("jsapp", "/")],
        parsers=[str(JSAPP_PARSERS)],
        state_dir=state,
        browser_pages=2,
        max_pages=PAGES,
        allow_private_addresses=True,
        delay_s=0,
        per_domain_concurrency=2,
        backoff_base_s=0.05,
        backoff_max_s=0.2,
        proxies=ProxySettings(
            tiers=[[plain.url, with_auth.url, closed]],
            sessions_per_domain=3,
            cooldown_s=300,
            profiles=[PROFILE],
        ),
    )
    with caplog.at_level(logging.INFO):
        result = await crawlfleet.Crawl(settings).run_async()
    assert result.complete

    records = [r for r in site.log if r.role == "jsapp"]
    pages = [r for r in records if r.path != "/robots.txt"]
    assert len({r.path for r in pages if r.status == 200}) >= PAGES - 1
    assert {r.client for r in pages} == {"127.0.1.41", "127.0.1.42"}
    assert {r.user_agent for r in pages} == {user_agent(PROFILE)}
    assert {r.client for r in records if r.path == "/robots.txt"} <= {"127.0.1.41", "127.0.1.42"}

    closed_id = build_tiers([[closed]])[0][0].id
    with sqlite3.connect(state / "state.sqlite") as db:
        quarantined = db.execute(
            "SELECT errors, quarantined_until > 0 FROM proxies WHERE id = ?", (closed_id,)
        ).fetchone()
        routes = db.execute(
            "SELECT fetcher, session_id IS NOT NULL, proxy_id, tier FROM attempts"
        ).fetchall()
        jars = [json.loads(c) for (c,) in db.execute("SELECT cookies FROM crawl_sessions")]
    assert quarantined == (1, 1)
    assert {(fetcher, has_session, tier) for fetcher, has_session, _, tier in routes} == {
        ("browser", 1, 0)
    }
    assert closed_id in {proxy for _, _, proxy, _ in routes}  # its failure is in the log
    names = [{cookie.name for cookie in CookieJar.from_stored(jar, "")} for jar in jars]
    assert any(CHALLENGE_COOKIE in jar for jar in names)  # set by script, kept in the session

    outputs = [record.getMessage() for record in caplog.records]
    assert all(PASSWORD not in text for text in outputs)
    for path in state.rglob("*"):
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


async def test_robots_txt_goes_through_a_proxy_of_the_crawl_past_a_dead_one(
    site: ThreadedDemoSite, tmp_path: Path, proxies: ProxyFarm
) -> None:
    proxy = proxies.start("127.0.1.43", auth=("crawler", PASSWORD))
    closed = proxies.closed()
    settings = Settings(
        seeds=[site.url("jsapp", "/")],
        allow_private_addresses=True,
        state_dir=tmp_path / "state",
        proxies=ProxySettings(tiers=[[closed, proxy.url]], profiles=[PROFILE]),
    )
    clock = SystemClock()
    async with AsyncExitStack() as stack:
        frontier = build_frontier(settings, MemoryQueueStore(), settings.seeds)
        link = await session_link(settings, clock, stack, frontier)
        assert link is not None
        robots, fetch_url = build_robots(settings, clock, stack, Credentials(), link)
        assert robots is not None
        decision = await robots.check(site.url("jsapp", "/list/1"))
        sitemap = await fetch_url(site.url("jsapp", "/sitemap.xml"))
        closed_usable = await link.pool.usable(build_tiers([[closed]])[0][0].id)
    assert (decision.allowed, decision.unavailable) == (True, False)
    assert sitemap.route is not None
    seen = [(r.path, r.client, r.user_agent) for r in site.log if r.role == "jsapp"]
    assert seen == [
        ("/robots.txt", "127.0.1.43", user_agent(PROFILE)),
        ("/sitemap.xml", "127.0.1.43", user_agent(PROFILE)),
    ]
    assert not closed_usable  # the rotation tried it first; the read went on past it
