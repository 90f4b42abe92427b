"""A large crawl's seen checks are served from the state file's page cache, not the disk.

With SQLite's default 2 MiB cache, every seen check of a random fingerprint in a state of
tens of thousands of requests read index pages back through the OS (``rchar`` grew with the
state: 52 KB per crawled page at 300,000 pages; decision 0017). Read bytes are counted by the
kernel, so this holds on a loaded machine too.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from crawlfleet.frontier.sqlite import SqliteQueueStore
from crawlfleet.frontier.store_types import Budget
from crawlfleet.models import CrawlRequest
from tests.contract.test_queue_store import FREE

REQUESTS = 150_000
PREFILTERED = 50_000  # the newest fingerprints the store's in-memory prefilter keeps
BATCH = 500


def request(n: int) -> CrawlRequest:
    url = f"https://shop{n % 4}.test/product/{n}"
    fingerprint = hashlib.sha1(url.encode()).hexdigest()[:32]
    return CrawlRequest(url=url, fingerprint=fingerprint, domain=f"shop{n % 4}.test")


def bytes_read() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        name, value = line.split(": ")
        if name == "rchar":
            return int(value)
    raise AssertionError("no rchar in /proc/self/io")


async def test_seen_checks_of_a_large_state_read_no_pages_back(tmp_path: Path) -> None:
    store = await SqliteQueueStore.open(tmp_path / "state.sqlite", policy=FREE)
    try:
        known = [request(n) for n in range(REQUESTS)]
        for start in range(0, REQUESTS, BATCH):
            assert await store.add(known[start : start + BATCH], Budget()) == BATCH
        # every offered link is seen: each batch is one probe of the fingerprint index
        again = known[REQUESTS - PREFILTERED - 1 :: -7]  # older than the prefilter, out of order
        before = bytes_read()
        for start in range(0, len(again), BATCH):
            assert await store.add(again[start : start + BATCH], Budget()) == 0
        read = bytes_read() - before
    finally:
        await store.close()

    assert read < 2_000_000, f"{read} bytes read for {len(again)} seen checks"
