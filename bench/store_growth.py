"""Does the embedded store's cost per page grow with the crawl? The state and item files only.

Drives the SQLite frontier store and the SQLite item sink as an embedded crawl of
``--pages`` pages does, without fetching: per page a share of ``claim(64)``, an ``add`` of
``--new`` new links and ``--old`` links admitted earlier (random, as links that passed the
frontier's offered-URL memo), ``complete`` with a report and a ``Visit`` (the known-URL row),
and ``write_page`` of one product item with its page's keys (the change feed). Fingerprints
are those of real URLs (random, as in a crawl). Prints CPU per page (user, sys: the sink's
thread included) and bytes read per page (``/proc/self/io``) for each ``--window`` pages:
a flat column is what issue #15 asks of the whole crawl.

    PYTHONPATH=src .venv/bin/python bench/store_growth.py --pages 1000000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import tempfile
import time
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report, Signal, Visit
from crawlfleet.models import CrawlRequest, Item, Lease
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from crawlfleet.records import Attempt, Outcome
from crawlfleet.urls import fingerprint

POLICY = DomainPolicy(delay_s=0.0, max_in_flight=64)
LEASE_S = 120.0
KINDS = ("http",)
ITEMS = {"items.stored.product": 1}
DOMAINS = 4


def request(n: int) -> CrawlRequest:
    domain = f"shop{n % DOMAINS}.test"
    url = f"http://{domain}/product/{n}.html"
    return CrawlRequest(url=url, fingerprint=fingerprint(url), domain=domain, depth=1)


def read_bytes() -> int:
    """Bytes this process read through read(2)/pread(2), page-cache hits included."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


async def crawl(state: Path, pages: int, window: int, new: int, old: int) -> None:
    store = await SqliteQueueStore.open(state / "state.sqlite", policy=POLICY)
    sink = await SqliteSink.open(state / "items.sqlite", crawl_id="growth")
    rng = random.Random(1)
    budget = Budget()
    next_id = 64
    await store.add([request(n) for n in range(next_id)], budget)
    done = 0
    now = 1_000_000.0
    print(f"{'pages':>9} {'µs CPU/page':>12} {'user':>6} {'sys':>6} {'KB read/page':>13}"
          f" {'pages/s':>8}")  # fmt: skip
    mark = (os.times(), read_bytes(), time.perf_counter())
    while done < pages:
        leases = await store.claim(64, now, LEASE_S, KINDS)
        if not leases:
            break
        for lease in leases:
            links = [request(next_id + i) for i in range(new)]
            links += [request(rng.randrange(next_id)) for _ in range(old)]
            next_id += new
            await store.add(links, budget)
            await write_page(sink, lease)
            await store.complete(lease, report(lease, now))
            done += 1
            if done % window == 0:
                mark = print_window(done, window, mark)
        now += 0.01
    await store.close()
    await sink.close()


async def write_page(sink: SqliteSink, lease: Lease) -> None:
    r = lease.request
    key = r.url.rsplit("/", 1)[1]
    item = Item("product", {"name": f"Product {key}", "price": "9.99", "url": r.url}, key, r.url)
    await sink.write_page([item], r.url, [("product", key)])


def report(lease: Lease, at: float) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "bench:1", Outcome.OK, 200, 4000, 0.02,
                      r.attempt, at)  # fmt: skip
    visit = Visit(content_hash=r.fingerprint * 2, item_types=("product",), visited_at=at)
    return Report(attempt, Signal.SUCCESS, counters=ITEMS, visit=visit)


def print_window(
    done: int, window: int, mark: tuple[os.times_result, int, float]
) -> tuple[os.times_result, int, float]:
    times, read, wall = os.times(), read_bytes(), time.perf_counter()
    user = (times.user - mark[0].user) / window * 1e6
    sys_ = (times.system - mark[0].system) / window * 1e6
    kb = (read - mark[1]) / window / 1024
    rate = window / (wall - mark[2])
    print(f"{done:>9} {user + sys_:>12.0f} {user:>6.0f} {sys_:>6.0f} {kb:>13.1f} {rate:>8.0f}",
          flush=True)  # fmt: skip
    return times, read, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300_000)
    parser.add_argument("--window", type=int, default=50_000)
    parser.add_argument("--new", type=int, default=1, help="new links a page (default 1)")
    parser.add_argument("--old", type=int, default=2, help="links seen before (default 2)")
    parser.add_argument("--dir", type=Path, help="where the files go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        asyncio.run(crawl(Path(tmp), args.pages, args.window, args.new, args.old))
        sizes = {p.name: p.stat().st_size for p in Path(tmp).iterdir() if p.is_file()}
        print("files (MB):", {k: round(v / 1e6, 1) for k, v in sorted(sizes.items())})


if __name__ == "__main__":
    main()
