"""``LoginFetcher`` against the demo members area: shared sessions, logged-out rules, failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.errors import LoginFailed
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from crawlfleet.parsing.login import load_logins
from crawlfleet.runtime.fetching.login import LoginFetcher
from crawlfleet.secretsfile import SiteSecrets
from crawlfleet.sessions.memory import MemorySessionStore
from crawlfleet.urls import fingerprint
from tests.fixtures.clock import FakeClock

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "login"


def request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint=fingerprint(url), domain="127.0.0.2")


def fetcher(store: MemorySessionStore, password: str = "wonderland-42") -> LoginFetcher:
    http = HttpFetcher(FetchOptions(allow_private_addresses=True), follow_redirects=False)
    secrets = SiteSecrets({"127.0.0.2": {"username": "alice", "password": password}}, {})
    logins = load_logins([str(EXAMPLE / "parsers.py")])
    return LoginFetcher(http, logins, store, secrets, FakeClock())


async def test_a_second_process_uses_the_stored_session(site: ThreadedDemoSite) -> None:
    store = MemorySessionStore()
    first, second = fetcher(store), fetcher(store)
    try:
        assert (await first.fetch(request(site.url("shop", "/members/orders/1001")))).status == 200
        assert (await second.fetch(request(site.url("shop", "/members/orders/1002")))).status == 200
    finally:
        await first.close()
        await second.close()
    posts = [r for r in site.log if r.method == "POST"]
    assert len(posts) == 1


async def test_a_refused_login_fails_the_domain_for_a_while_without_trying_again(
    site: ThreadedDemoSite,
) -> None:
    bad = fetcher(MemorySessionStore(), password="wrong")
    try:
        with pytest.raises(LoginFailed, match="refused the credentials") as first:
            await bad.fetch(request(site.url("shop", "/members/")))
        with pytest.raises(LoginFailed):
            await bad.fetch(request(site.url("shop", "/members/orders/1001")))
    finally:
        await bad.close()
    assert "wrong" not in str(first.value)
    assert len([r for r in site.log if r.method == "POST"]) == 1
    assert not [r for r in site.log if r.path.startswith("/members/orders/")]
