"""CPU cost of the frontier's store per crawled page, for the embedded QueueStores.

Each page is one share of ``claim(limit)`` (limit cycling 1..64), one ``add`` of 30 links of
which 25 were already seen, and one ``complete`` with its report (an OK attempt with a 200, a
clean-success signal and one stored item: the store adds the attempt row and the counters
and moves the block window): the store work of one page in an embedded crawl. Prints
microseconds of process CPU per page (store calls only) and wall pages/s.

    .venv/bin/python bench/frontier_ops.py [--pages 20000] [--domains 4]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome

LINKS_PER_PAGE = 30
SEEN_PER_PAGE = 25
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=64)
LEASE_S = 120.0
KINDS = ("http",)
ITEMS = {"items.stored.product": 1}


@dataclass(slots=True)
class Result:
    name: str
    pages: int
    cpu_s: float
    wall_s: float
    cpu_claim_s: float
    cpu_add_s: float
    cpu_complete_s: float


def request(n: int, domains: int) -> CrawlRequest:
    domain = f"site{n % domains}.test"
    url = f"https://{domain}/page/{n}"
    return CrawlRequest(url=url, fingerprint=f"{n:032x}", domain=domain, depth=1)


def links_for(page: int, next_id: int, domains: int, rng: random.Random) -> list[CrawlRequest]:
    """25 links to pages admitted earlier and 5 new ones."""
    seen = [request(rng.randrange(next_id), domains) for _ in range(SEEN_PER_PAGE)]
    new = [request(next_id + i, domains) for i in range(LINKS_PER_PAGE - SEEN_PER_PAGE)]
    return seen + new


def report(lease: Lease, at: float) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "bench:1", Outcome.OK, 200, 4000, 0.02,
                      r.attempt, at)  # fmt: skip
    return Report(attempt, Signal.SUCCESS, counters=ITEMS)


async def run(name: str, store: QueueStore, pages: int, domains: int) -> Result:
    rng = random.Random(1)
    budget = Budget()
    await store.add([request(n, domains) for n in range(domains * 8)], budget)
    next_id = domains * 8
    cpu = {"claim": 0.0, "add": 0.0, "complete": 0.0}

    done = 0
    now = 1_000_000.0
    wall_start = time.perf_counter()
    while done < pages:
        limit = min(done % 64 + 1, pages - done)
        start = time.process_time()
        leases = await store.claim(limit, now, LEASE_S, KINDS)
        cpu["claim"] += time.process_time() - start
        for lease in leases:
            links = links_for(done, next_id, domains, rng)
            next_id += LINKS_PER_PAGE - SEEN_PER_PAGE
            done_report = report(lease, now)
            start = time.process_time()
            await store.add(links, budget)
            mid = time.process_time()
            await store.complete(lease, done_report)
            cpu["add"] += mid - start
            cpu["complete"] += time.process_time() - mid
            done += 1
        now += 0.01
    wall_s = time.perf_counter() - wall_start
    await store.close()
    return Result(name, done, sum(cpu.values()), wall_s, cpu["claim"], cpu["add"], cpu["complete"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--domains", type=int, default=4)
    args = parser.parse_args()
    results = [await run("memory", MemoryQueueStore(policy=POLICY), args.pages, args.domains)]
    with tempfile.TemporaryDirectory() as tmp:
        store = await SqliteQueueStore.open(Path(tmp) / "state.sqlite", policy=POLICY)
        results.append(await run("sqlite", store, args.pages, args.domains))
    print(f"{args.pages} pages, {args.domains} domains, claim(1..64) + add(30, 25 seen) + complete")
    print(
        f"{'store':<8} {'µs CPU/page':>12} {'claim':>8} {'add':>8} {'complete':>9} {'pages/s':>9}"
    )
    for r in results:
        per = 1e6 / r.pages
        print(
            f"{r.name:<8} {r.cpu_s * per:>12.1f} {r.cpu_claim_s * per:>8.1f} "
            f"{r.cpu_add_s * per:>8.1f} {r.cpu_complete_s * per:>9.1f} {r.pages / r.wall_s:>9.0f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
