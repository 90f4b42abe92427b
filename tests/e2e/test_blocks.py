"""A few 403 URLs among 200 pages of one host with a delay: the host is not slowed down.

Runs the embedded runtime in-process (memory store, real HTTP to the demo site), checked
from the server's access log.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import AsyncExitStack

import pytest

from crawlfleet.clock import SystemClock
from crawlfleet.demosite import ThreadedDemoSite, gaps_s
from crawlfleet.demosite.lab import BLOCKS_FORBIDDEN, BLOCKS_PAGES
from crawlfleet.events import DomainEscalated, EventBus
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.runtime.backends import Backends
from crawlfleet.runtime.local import LocalRunner
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.wiring import build_crawl
from crawlfleet.settings import Settings

DELAY_S = 0.1  # large against one response time (~1-5 ms), so 1.2x holds on a busy machine


@pytest.mark.slow
async def test_a_few_403s_among_200_pages_finish_within_the_delay_budget(
    site: ThreadedDemoSite,
) -> None:
    seed = site.url("lab", "/blocks/")
    settings = Settings(
        seeds=[seed],
        allow=["/blocks/"],
        allow_private_addresses=True,
        delay_s=DELAY_S,
        max_retries=0,
    )
    events = EventBus()
    escalations: list[DomainEscalated] = []
    events.subscribe(DomainEscalated, escalations.append)
    clock = SystemClock()
    async with AsyncExitStack() as stack:
        graph = await build_crawl(
            settings,
            seeds=[seed],
            backends=Backends(
                MemoryQueueStore(policy=domain_policy(settings)), sink=MemorySink(clock=clock)
            ),
            events=events,
            clock=clock,
            stack=stack,
        )
        runner = LocalRunner(
            graph.crawler, concurrency=8, clock=clock, events=events, crawl_id="blocks"
        )
        started = time.monotonic()
        result = await runner.run([seed])
        elapsed_s = time.monotonic() - started
        dead = await graph.frontier.dead_letters()

    assert result.complete
    requests = [r for r in site.log if r.role == "lab" and r.path != "/robots.txt"]
    fetched = Counter(r.path for r in requests)
    assert {p for p, n in fetched.items() if n > 1} == set()
    pages = {f"/blocks/page/{n}" for n in range(1, BLOCKS_PAGES + 1)}
    assert pages <= set(fetched)
    forbidden = {f"/blocks/forbidden/{n}" for n in BLOCKS_FORBIDDEN}
    assert {r.path for r in requests if r.status == 403} == forbidden
    assert len(dead) == len(BLOCKS_FORBIDDEN)
    assert escalations == []
    budget_s = 1.2 * len(requests) * DELAY_S
    assert elapsed_s <= budget_s, f"{elapsed_s:.2f} s for {len(requests)} requests"
    assert min(gaps_s(requests, "lab")) >= 0.9 * DELAY_S
