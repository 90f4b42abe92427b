"""Prometheus families rendered from a crawl's store (in-memory twin) and this process's work."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from collections import defaultdict
from dataclasses import dataclass

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from crawlfleet.counters import LATENCY_BUCKETS_S, bucket_name
from crawlfleet.errors import StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.store_types import DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest
from crawlfleet.monitoring.metric_families import latency_buckets
from crawlfleet.monitoring.metric_snapshot import OTHER_DOMAINS
from crawlfleet.monitoring.metrics import Metrics
from crawlfleet.proxies.memory import MemoryProxyStates
from crawlfleet.proxies.protocols import Cooldown
from crawlfleet.records import Attempt, Outcome
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Settings
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, Canned, CannedFetcher, html, make_crawl, seed

FREE = DomainPolicy(delay_s=0.0, max_in_flight=100)


def request(domain: str, n: int) -> CrawlRequest:
    return CrawlRequest(f"https://{domain}/{n}", f"fp-{domain}-{n}", domain)


async def memory_frontier() -> tuple[Frontier, MemoryQueueStore]:
    store = MemoryQueueStore()
    frontier = build_frontier(Settings(delay_s=0.0), store, [])
    await frontier.start(T0)
    return frontier, store


async def finish(store: MemoryQueueStore, limit: int, status: int = 200) -> int:
    """Claim up to ``limit`` requests and complete each with a response of ``status``."""
    leases = await store.claim(limit, T0, 60.0, FREE, ("http",))
    for lease in leases:
        r = lease.request
        attempt = Attempt(
            url=r.url,
            fingerprint=r.fingerprint,
            domain=r.domain,
            worker="w",
            outcome=Outcome.OK,
            status=status,
            bytes=100,
            latency_s=0.2,
            retry=0,
            at=T0,
        )
        assert await store.complete(lease, Report(attempt, Signal.SUCCESS), FREE)
    return len(leases)


def exposition(metrics: Metrics) -> str:
    """The text a Prometheus server reads from ``/metrics``."""
    return generate_latest(metrics.registry).decode()


def scrape(metrics: Metrics) -> dict[str, list[Sample]]:
    """Samples by family name (``_total`` stripped from counters), parsed from the text."""
    families = text_string_to_metric_families(exposition(metrics))
    return {family.name: family.samples for family in families}


def read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def by_domain(samples: list[Sample], name: str) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for sample in samples:
        if sample.name == name:
            totals[sample.labels["domain"]] += sample.value
    return dict(totals)


async def test_ten_thousand_domains_give_top_n_labels_plus_other_and_sums_stay_whole() -> None:
    frontier, store = await memory_frontier()
    requests = [request(f"d{i:05}.test", n) for i in range(10_000) for n in range(1 + i % 3)]
    await frontier.add(requests)
    fetched = await finish(store, 10_000)
    metrics = Metrics(top_domains=50)
    metrics.watch("big", frontier, runtime="embedded")
    await metrics.refresh()

    families = scrape(metrics)
    pages = by_domain(families["crawlfleet_pages_fetched"], "crawlfleet_pages_fetched_total")
    assert len(pages) == 51
    assert OTHER_DOMAINS in pages
    assert sum(pages.values()) == fetched == (await frontier.stats()).fetched
    busiest = {view.domain for view in await frontier.domains(50)}
    assert set(pages) - {OTHER_DOMAINS} == busiest
    queued = by_domain(families["crawlfleet_queued_requests"], "crawlfleet_queued_requests")
    assert sum(queued.values()) == (await frontier.counts()).queued
    for family in families.values():
        domains = {s.labels["domain"] for s in family if "domain" in s.labels}
        assert len(domains) <= 51


async def test_labels_once_given_are_kept_and_other_never_goes_down() -> None:
    frontier, store = await memory_frontier()
    await frontier.add([request(f"d{i}.test", n) for i in range(4) for n in range(4 - i)])
    metrics = Metrics(top_domains=2)
    metrics.watch("c", frontier, runtime="embedded")
    await finish(store, 4)
    await metrics.refresh()
    first = by_domain(scrape(metrics)["crawlfleet_attempts"], "crawlfleet_attempts_total")
    assert set(first) == {"d0.test", "d1.test", OTHER_DOMAINS}

    # A new domain becomes the busiest: it is counted in ``other``, which only grows.
    await frontier.add([request("late.test", n) for n in range(50)])
    await finish(store, 100)
    await metrics.refresh()
    later = by_domain(scrape(metrics)["crawlfleet_attempts"], "crawlfleet_attempts_total")
    assert set(later) == set(first)
    assert later[OTHER_DOMAINS] > first[OTHER_DOMAINS]
    assert sum(later.values()) == (await frontier.stats()).get("attempts")


async def test_with_free_labels_every_domain_has_one_and_there_is_no_other() -> None:
    frontier, store = await memory_frontier()
    await frontier.add([request(f"d{i}.test", 0) for i in range(3)])
    await finish(store, 3)
    metrics = Metrics(top_domains=5)
    metrics.watch("c", frontier, runtime="embedded")
    await metrics.refresh()
    pages = by_domain(scrape(metrics)["crawlfleet_pages_fetched"], "crawlfleet_pages_fetched_total")
    assert pages == {"d0.test": 1, "d1.test": 1, "d2.test": 1}


def test_latency_buckets_are_made_cumulative_with_inf_last() -> None:
    counters = {bucket_name(0.03): 2, bucket_name(0.3): 1, bucket_name(99.0): 1}
    buckets = latency_buckets(counters)
    assert [bound for bound, _ in buckets] == [
        *(f"{b:g}" for b in LATENCY_BUCKETS_S[:-1]),
        "+Inf",
    ]
    assert dict(buckets) == {
        "0.05": 2,
        "0.1": 2,
        "0.25": 2,
        "0.5": 3,
        "1": 3,
        "2.5": 3,
        "5": 3,
        "10": 3,
        "30": 3,
        "+Inf": 4,
    }


async def test_a_crawl_shows_in_the_families_with_conventional_names() -> None:
    """Pages by status class sum to the fetches; escalations, items and fill ratios show."""
    clock = FakeClock(T0)
    forbidden = Canned(403, b"<html><title>Access denied</title></html>")  # a ban, not a refusal
    pages = {f"https://a.test/{n}": forbidden for n in range(8)}
    pages["https://a.test/"] = html(*pages, title="home")
    pages["https://b.test/"] = Canned(500)
    fetcher = CannedFetcher(clock, pages)
    crawl = make_crawl(fetcher, seeds=["https://a.test/", "https://b.test/"], max_retries=0)
    metrics = Metrics()
    metrics.watch("c", crawl.frontier, runtime="embedded")
    metrics.track("c", events=crawl.events, quality=crawl.crawler.parts.pipeline.quality)
    await seed(crawl, "https://a.test/", "https://b.test/")
    await crawl.run()
    await metrics.refresh()

    families = scrape(metrics)
    fetched = sum(
        s.value for s in families["crawlfleet_pages_fetched"] if s.name.endswith("_total")
    )
    assert fetched == len(fetcher.fetched)
    statuses = {
        (s.labels["outcome"], s.labels["status_class"]): s.value
        for s in families["crawlfleet_pages_fetched"]
        if s.labels["domain"] == "b.test" and s.name.endswith("_total")
    }
    assert statuses == {("dead", "5xx"): 1}
    dead = [s.value for s in families["crawlfleet_dead_letters"]]
    assert dead == [(await crawl.frontier.counts()).dead]
    assert dead[0] >= 1
    changes = {
        s.labels["change"]: s.value
        for s in families["crawlfleet_strategy_changes"]
        if s.name.endswith("_total")
    }
    assert changes["escalated"] >= 1
    stored = [
        s.value
        for s in families["crawlfleet_items"]
        if s.labels == {"crawl": "c", "item_type": "page", "result": "stored"}
    ]
    assert stored == [len(await crawl.sink.stored("page"))]
    fill = {s.labels["field"]: s.value for s in families["crawlfleet_field_fill_ratio"]}
    assert fill["url"] == 1.0
    count = [
        s.value for s in families["crawlfleet_fetch_latency_seconds"] if s.name.endswith("_count")
    ]
    assert sum(count) == fetched
    types = [line.split()[2:] for line in exposition(metrics).splitlines() if "# TYPE" in line]
    for name, kind in types:
        assert name.startswith("crawlfleet_")
        assert name.endswith("_total") == (kind == "counter")
        assert kind != "histogram" or name.endswith("_seconds")


async def test_a_scrape_renders_the_last_refresh_and_never_reads_the_store() -> None:
    frontier, store = await memory_frontier()
    await frontier.add([request("a.test", n) for n in range(4)])
    metrics = Metrics()
    metrics.watch("c", frontier, runtime="embedded")
    assert scrape(metrics)["crawlfleet_pages_fetched"] == []  # nothing read yet
    await finish(store, 1)
    await metrics.refresh()
    await finish(store, 3)  # not refreshed: the scrape still shows one page
    pages = by_domain(scrape(metrics)["crawlfleet_pages_fetched"], "crawlfleet_pages_fetched_total")
    assert pages == {"a.test": 1}


@dataclass(frozen=True)
class Beat:
    name: str
    seen_at: float


async def test_heartbeats_from_the_store_and_from_this_worker_are_one_family() -> None:
    frontier, _ = await memory_frontier()

    async def beats() -> list[Beat]:
        return [Beat("w1", T0 - 5), Beat("w2", T0)]

    metrics = Metrics()
    metrics.watch("c", frontier, runtime="distributed", beats=beats)
    metrics.beat("w1", T0)
    metrics.ran("c", "w1", 7)
    await metrics.refresh()
    families = scrape(metrics)
    beat = {
        s.labels["worker"]: s.value
        for s in families["crawlfleet_worker_heartbeat_timestamp_seconds"]
    }
    assert beat == {"w1": T0, "w2": T0}
    leases = [
        (s.labels, s.value)
        for s in families["crawlfleet_worker_leases"]
        if s.name.endswith("_total")
    ]
    assert leases == [({"crawl": "c", "worker": "w1"}, 7)]
    info = families["crawlfleet_crawl_info"]
    assert [s.labels for s in info] == [{"crawl": "c", "runtime": "distributed"}]


async def test_metrics_are_served_on_loopback_and_a_taken_port_is_one_line_error() -> None:
    frontier, store = await memory_frontier()
    await frontier.add([request("a.test", 0)])
    await finish(store, 1)
    metrics = Metrics()
    metrics.watch("c", frontier, runtime="embedded")
    await metrics.refresh()
    server = metrics.serve(0)
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        text = await asyncio.to_thread(read, server.url)
        assert (
            'crawlfleet_pages_fetched_total{crawl="c",domain="a.test",outcome="ok",status_class="2xx"} 1.0'
            in text
        )
        with pytest.raises(StateError, match=f"cannot serve metrics on 127.0.0.1:{server.port}"):
            metrics.serve(server.port)
    finally:
        server.close()
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", server.port))


def test_a_negative_top_domains_is_refused() -> None:
    with pytest.raises(ValueError, match="top domains must be >= 0"):
        Metrics(top_domains=-1)


async def test_proxies_by_state_read_from_the_proxy_states() -> None:
    frontier, _ = await memory_frontier()
    states = MemoryProxyStates()
    for proxy in ("px-a", "px-b", "px-c"):
        await states.register(proxy, 0, "127.0.0.1:1")
    cooldown = Cooldown(base_s=1e12, max_s=1e12)  # quarantined whatever the wall clock says
    await states.penalize("px-b", 0.0, error=True, quarantine=True, cooldown=cooldown)
    metrics = Metrics()
    metrics.watch("c", frontier, runtime="embedded", proxies=states.all)
    await metrics.refresh()
    found = {s.labels["state"]: s.value for s in scrape(metrics)["crawlfleet_proxies"]}
    assert found == {"ok": 2, "quarantined": 1}
