"""The proxy pool end to end: real tinyproxy processes in front of the guarded demo host.

Each tinyproxy sends its outgoing connections from its own 127.0.1.x address, so the demo
site's access log (``AccessRecord.client``) tells which proxy every request came through.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from crawlfleet.clock import SystemClock
from crawlfleet.demosite import GUARDED, GuardRules, ThreadedDemoSite, read_access_log
from crawlfleet.events import EventBus
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.proxies.endpoints import build_tiers
from crawlfleet.runtime.backends import Backends
from crawlfleet.runtime.local import LocalRunner
from crawlfleet.runtime.wiring import build_crawl
from crawlfleet.settings import Settings
from crawlfleet.settings.proxies import ProxySettings
from tests.fixtures.cli import run_cli
from tests.fixtures.tinyproxy import ProxyFarm

PASSWORD = "Pr0xy-s3cret-9931"
PAGES = 40


def guarded_site(path: Path | None, rules: GuardRules) -> ThreadedDemoSite:
    return ThreadedDemoSite(addresses={GUARDED: "127.0.0.20"}, access_log_path=path, guard=rules)


def pages_ok(records: list, count: int) -> set[str]:  # type: ignore[type-arg]
    wanted = {f"/page/{n}" for n in range(1, count + 1)}
    return wanted - {r.path for r in records if r.role == GUARDED and r.status == 200}


@pytest.fixture
def banned_site(tmp_path: Path) -> Iterator[tuple[ThreadedDemoSite, Path]]:
    path = tmp_path / "access.jsonl"
    rules = GuardRules(burst=1000, window_s=60, ban_s=60, page_count=PAGES, bursts={"127.0.1.2": 4})
    with guarded_site(path, rules) as site:
        yield site, path


@pytest.mark.slow
def test_a_banned_proxy_rests_its_cooldown_and_the_crawl_misses_nothing(
    tmp_path: Path, proxies: ProxyFarm, banned_site: tuple[ThreadedDemoSite, Path]
) -> None:
    site, access_log = banned_site
    banned = proxies.start("127.0.1.2")
    with_auth = proxies.start("127.0.1.3", auth=("crawler", PASSWORD))
    third = proxies.start("127.0.1.4")
    cooldown_s = 2.0
    config = tmp_path / "crawl.toml"
    config.write_text(
        "[crawl]\nper_domain_concurrency = 2\n[crawl.proxies]\n"
        f'tiers = [["{banned.url}", "{with_auth.url}", "{third.url}"]]\n'
        f"cooldown_s = {cooldown_s}\nsessions_per_domain = 3\n"
    )
    state = tmp_path / "state"
    seed = site.url(GUARDED, "/")
    crawl = run_cli(
        "crawl", seed, "--state", str(state), "--config", str(config),
        "--allow-private-addresses", "--delay", "0.1", "-o", str(tmp_path / "items.jsonl"),
        cwd=tmp_path, timeout_s=120,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stdout + crawl.stderr
    records = read_access_log(access_log)
    assert pages_ok(records, PAGES) == set()

    by_client = Counter(r.client for r in records if r.role == GUARDED)
    assert by_client["127.0.1.3"] > 0
    assert by_client["127.0.1.4"] > 0
    ban = min(r.wall_s for r in records if r.client == "127.0.1.2" and r.status in (403, 429))
    # Requests already in flight may land just after the ban; none starts in the cooldown.
    during = [
        r for r in records if r.client == "127.0.1.2" and ban + 0.5 < r.wall_s < ban + cooldown_s
    ]
    assert during == []
    assert records[-1].wall_s > ban + cooldown_s  # the crawl outlived the cooldown

    with sqlite3.connect(state / "state.sqlite") as db:
        row = db.execute(
            "SELECT bans, strikes, tier, label FROM proxies WHERE id = ?",
            (build_tiers([[banned.url]])[0][0].id,),
        ).fetchone()
        routes = db.execute(
            "SELECT count(*), count(DISTINCT proxy_id), count(DISTINCT session_id), min(tier)"
            " FROM attempts WHERE proxy_id IS NOT NULL"
        ).fetchone()
    assert row[0] >= 1
    assert row[1] >= 1
    assert (row[2], row[3]) == (0, f"127.0.0.1:{banned.port}")
    assert routes[0] >= PAGES
    assert (routes[1], routes[3]) == (3, 0)
    assert routes[2] >= 3

    listing = run_cli("proxies", "--state", str(state), cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    for proxy in (banned, with_auth, third):
        assert f"127.0.0.1:{proxy.port}" in listing.stdout
    status = run_cli("status", "--state", str(state), cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    outputs = [crawl.stdout, crawl.stderr, listing.stdout, listing.stderr, status.stdout]
    assert all(PASSWORD not in text and "crawler:" not in text for text in outputs)
    for path in [*state.rglob("*"), tmp_path / "items.jsonl"]:
        if path.is_file():
            assert PASSWORD.encode() not in path.read_bytes(), path


async def crawl_in_process(settings: Settings, seed: str) -> tuple[bool, int]:
    """Run the embedded crawl step in this process; (complete, dead letters)."""
    clock = SystemClock()
    events = EventBus()
    async with AsyncExitStack() as stack:
        graph = await build_crawl(
            settings,
            seeds=[seed],
            backends=Backends(MemoryQueueStore(), sink=MemorySink(clock=clock)),
            events=events,
            clock=clock,
            stack=stack,
        )
        runner = LocalRunner(graph.crawler, concurrency=4, clock=clock, events=events, crawl_id="p")
        result = await runner.run([seed])
        return result.complete, len(await graph.frontier.dead_letters())


@pytest.mark.slow
async def test_every_tier_quarantined_moves_on_then_waits_and_finishes(
    tmp_path: Path, proxies: ProxyFarm, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = proxies.start("127.0.1.5"), proxies.start("127.0.1.6")
    rules = GuardRules(
        window_s=60, ban_s=1.5, page_count=10, bursts={"127.0.1.5": 5, "127.0.1.6": 5}
    )
    with guarded_site(None, rules) as site:
        seed = site.url(GUARDED, "/")
        settings = Settings(
            seeds=[seed],
            allow_private_addresses=True,
            delay_s=0.0,
            state_dir=tmp_path / "state",
            proxies=ProxySettings(
                tiers=[[first.url], [second.url]], cooldown_s=1.0, max_cooldown_s=2.0
            ),
        )
        with caplog.at_level(logging.WARNING, logger="crawlfleet.runtime.session_pool"):
            complete, dead = await crawl_in_process(settings, seed)
        missing = pages_ok(site.log, 10)
    assert (complete, dead, missing) == (True, 0, set())
    messages = [r.getMessage() for r in caplog.records]
    assert any("every proxy of tier 0 is quarantined; moving to tier 1" in m for m in messages)
    assert any("every proxy of the last tier (1) is quarantined; waiting" in m for m in messages)


@pytest.mark.slow
async def test_a_closed_a_hanging_and_a_refusing_proxy_are_quarantined(
    tmp_path: Path, proxies: ProxyFarm
) -> None:
    good = proxies.start("127.0.1.7")
    guarded = proxies.start("127.0.1.8", auth=("crawler", PASSWORD))
    wrong = guarded.url.replace(PASSWORD, "not-the-password")
    bad = [proxies.closed(), proxies.hanging(), wrong]
    rules = GuardRules(burst=1000, page_count=10)
    with guarded_site(None, rules) as site:
        seed = site.url(GUARDED, "/")
        settings = Settings(
            seeds=[seed],
            allow_private_addresses=True,
            delay_s=0.0,
            read_timeout_s=1.0,
            connect_timeout_s=1.0,
            total_timeout_s=2.0,
            backoff_base_s=0.1,
            max_retries=5,
            state_dir=tmp_path / "state",
            proxies=ProxySettings(tiers=[[*bad, good.url]], cooldown_s=60, sessions_per_domain=4),
        )
        complete, dead = await crawl_in_process(settings, seed)
        missing = pages_ok(site.log, 10)
        clients = {r.client for r in site.log}
    assert (complete, dead, missing) == (True, 0, set())
    assert clients <= {"127.0.1.7", "127.0.1.8"}  # robots.txt too goes through the proxies
    with sqlite3.connect(tmp_path / "state" / "state.sqlite") as db:
        faults = dict(db.execute("SELECT label, errors FROM proxies WHERE strikes > 0").fetchall())
    assert set(faults) == {url.rsplit("@", 1)[-1].removeprefix("http://") for url in bad}


@pytest.mark.slow
async def test_the_strategy_tier_and_session_epoch_are_honoured(
    tmp_path: Path, proxies: ProxyFarm
) -> None:
    second_tier = proxies.start("127.0.1.9")
    rules = GuardRules(burst=1000, page_count=5)
    with guarded_site(None, rules) as site:
        seed = site.url(GUARDED, "/")
        settings = Settings(
            seeds=[seed],
            allow_private_addresses=True,
            delay_s=0.0,
            state_dir=tmp_path / "state",
            proxies=ProxySettings(tiers=[["direct"], [second_tier.url]]),
        )
        store = MemoryQueueStore()
        await store.set_strategy("127.0.0.20", {"tier": "1", "fetcher": "http"})
        clock = SystemClock()
        async with AsyncExitStack() as stack:
            graph = await build_crawl(
                settings,
                seeds=[seed],
                backends=Backends(store, sink=MemorySink(clock=clock)),
                events=EventBus(),
                clock=clock,
                stack=stack,
            )
            runner = LocalRunner(
                graph.crawler, concurrency=2, clock=clock, events=EventBus(), crawl_id="t"
            )
            assert (await runner.run([seed])).complete
            view = await graph.frontier.domain("127.0.0.20")
        pages = [r for r in site.log if r.path != "/robots.txt"]
    assert {r.client for r in pages} == {"127.0.1.9"}
    assert dict(view.strategy) == {"tier": "1", "fetcher": "http"}  # others' keys kept


async def test_session_cookies_survive_a_resume_until_the_epoch_grows(tmp_path: Path) -> None:
    with guarded_site(None, GuardRules(burst=1000, page_count=5)) as site:

        async def crawl(path: str, store: MemoryQueueStore) -> list[int]:
            site.clear_log()
            seed = site.url(GUARDED, path)
            settings = Settings(
                seeds=[seed],
                allow_private_addresses=True,
                delay_s=0.0,
                max_depth=0,
                state_dir=tmp_path / "state",
                proxies=ProxySettings(tiers=[["direct"]], sessions_per_domain=1),
            )
            clock = SystemClock()
            async with AsyncExitStack() as stack:
                graph = await build_crawl(
                    settings,
                    seeds=[seed],
                    backends=Backends(store, sink=MemorySink(clock=clock)),
                    events=EventBus(),
                    clock=clock,
                    stack=stack,
                )
                runner = LocalRunner(
                    graph.crawler, concurrency=1, clock=clock, events=EventBus(), crawl_id="r"
                )
                assert (await runner.run([seed])).complete
            return [r.status for r in site.log if r.path == path]

        assert await crawl("/page/1", MemoryQueueStore()) == [302, 200]  # challenge passed
        assert await crawl("/page/2", MemoryQueueStore()) == [200]  # its cookie, from the state
        store = MemoryQueueStore()
        await store.set_strategy("127.0.0.20", {"session_epoch": "1"})
        assert await crawl("/page/3", store) == [302, 200]  # a new session: a new challenge
