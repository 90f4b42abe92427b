"""What one sample round of the distributed dashboard costs, by the number of domains.

Starts a private redis-server on a free loopback port for each N (never the shared one), defines a crawl
(``CrawlDefinition``) with one queued request on each of N domains through
``RedisQueueStore.add``, and 20 worker heartbeats, then times through ``DistributedOperations``
(PostgreSQL is not touched by a sample round) the round the dashboard runs every 2 s:
``Sampler.sample_all`` (crawl list, counts, statistics, the ETA's 1,000 busiest domains,
run state, workers), and the crawl page's domain table read (``domains(200)``). Prints the
median of ``--rounds`` rounds side by side for each N.

    .venv/bin/python bench/dashboard_bench.py                 # 100, 1,000 and 10,000 domains
    .venv/bin/python bench/dashboard_bench.py --domains 1000 --rounds 10
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import orjson
from redis.asyncio import Redis
from redis_memory import start_redis  # run as a script: bench/ is on sys.path

from crawlfleet.clock import SystemClock
from crawlfleet.dashboard.sampler import Sampler
from crawlfleet.frontier.redis import RedisQueueStore
from crawlfleet.frontier.store_types import Budget
from crawlfleet.models import CrawlRequest
from crawlfleet.ops.distributed import DistributedOperations
from crawlfleet.runtime.backends import frontier_prefix
from crawlfleet.runtime.celery.definition import WORKERS, CrawlDefinition, definition_key
from crawlfleet.settings import Settings

WORKER_BEATS = 20
BATCH = 1000


async def define(redis_url: str, crawl_id: str, domains: int) -> None:
    client = Redis.from_url(redis_url)
    settings = Settings(crawl_id=crawl_id)
    await client.set(definition_key(crawl_id), CrawlDefinition(settings, ()).to_json())
    now = time.time()
    for n in range(WORKER_BEATS):
        beat = {"seen_at": now, "queues": ["http"], "concurrency": 8, "crawl": crawl_id,
                "in_flight": 3, "pages": 100 * n}  # fmt: skip
        await client.hset(WORKERS, f"bench:{n}", orjson.dumps(beat))
    await client.aclose()
    store = await RedisQueueStore.open(redis_url, frontier_prefix(crawl_id))
    requests = [
        CrawlRequest(f"http://d{n}.test/", f"fp-{crawl_id}-{n}", f"d{n}.test")
        for n in range(domains)
    ]
    for start in range(0, domains, BATCH):
        await store.add(requests[start : start + BATCH], Budget())
    await store.close()


async def measure(redis_url: str, domains: int, rounds: int) -> tuple[float, float]:
    crawl_id = f"bench-{domains}"
    await define(redis_url, crawl_id, domains)
    source = DistributedOperations(redis_url, "dbname=unused")
    sampler = Sampler(source, SystemClock())
    try:
        await sampler.sample_all()  # opens the frontier once, as the dashboard does
        sample_s, table_s = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            await sampler.sample_all()
            sample_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            await (await source.reader(crawl_id)).domains(200)
            table_s.append(time.perf_counter() - started)
    finally:
        await source.close()
    return statistics.median(sample_s), statistics.median(table_s)


async def main(counts: list[int], rounds: int) -> None:
    print(f"{'domains':>8}  {'sample round (ms)':>18}  {'domain table (ms)':>18}")
    for domains in counts:
        with tempfile.TemporaryDirectory() as workdir:
            process, redis_url = start_redis(Path(workdir))  # one crawl per server
            try:
                sample_s, table_s = await measure(redis_url, domains, rounds)
            finally:
                process.terminate()
                process.wait(timeout=10)
        print(f"{domains:>8}  {sample_s * 1000:>18.1f}  {table_s * 1000:>18.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domains", type=int, action="append")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.domains or [100, 1000, 10_000], args.rounds))
