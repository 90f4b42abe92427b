"""PostgreSQL rows and bytes per item and per attempt, for docs/capacity.md.

Starts a private PostgreSQL (the tests' ``PostgresServer``: initdb in a temp dir, a free
loopback port; never the shared server), migrates it, writes ``--items`` synthetic product
items through ``PostgresSink`` (batches of 100, like a worker) and as many attempts through
``PostgresAttemptLog`` (the dispatcher's copy), then prints ``pg_total_relation_size`` (heap,
TOAST and indexes) per row of ``items`` and ``attempts``.

    PYTHONPATH=src:. .venv/bin/python bench/postgres_bytes.py --items 50000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import psycopg

from crawlfleet.models import Item
from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
from crawlfleet.pipeline.sinks.postgres import PostgresSink
from crawlfleet.pipeline.sinks.postgres_schema import migrate
from crawlfleet.records import Attempt, Outcome
from tests.fixtures.postgres_server import benchmark_postgres

BATCH = 100


def product(n: int) -> Item:
    url = f"https://www.shop{n % 1000}.example/products/item-{n}.html"
    data = {
        "name": f"Product number {n} with a reasonably long name",
        "price": round(9.99 + n % 500, 2),
        "currency": "EUR",
        "sku": f"SKU-{n:09d}",
        "url": url,
        "in_stock": n % 3 != 0,
        "description": "A synthetic product description of about two hundred characters, "
        "as a shop page gives under its title: material, size, colour, care and what the "
        "box holds. " + str(n),
    }
    return Item("product", data, key=f"SKU-{n:09d}", url=url, fetched_at=time.time())


def attempt(n: int) -> Attempt:
    url = f"https://www.shop{n % 1000}.example/products/item-{n}.html"
    return Attempt(url, f"{n:032x}", f"www.shop{n % 1000}.example", "worker-1@host:4242",
                   Outcome.OK, 200, 35_000, 0.21, 0, time.time())  # fmt: skip


async def fill(dsn: str, count: int) -> None:
    sink = await PostgresSink.open(dsn, crawl_id="bench")
    log = await PostgresAttemptLog.open(dsn, crawl_id="bench")
    for start in range(0, count, BATCH):
        numbers = range(start, min(count, start + BATCH))
        await sink.write([product(n) for n in numbers])
        await log.record([attempt(n) for n in numbers])
    await sink.close()
    await log.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=50_000)
    args = parser.parse_args(argv)
    with benchmark_postgres() as server:
        dsn = server.dsn()
        migrate(dsn)
        started = time.perf_counter()
        asyncio.run(fill(dsn, args.items))
        wall = time.perf_counter() - started
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            print("| table | rows | total bytes | bytes per row | heap | indexes |")
            print("| --- | --- | --- | --- | --- | --- |")
            for table in ("items", "attempts"):
                rows, total, heap, index = conn.execute(
                    f"SELECT count(*), pg_total_relation_size('{table}'), "
                    f"pg_table_size('{table}'), pg_indexes_size('{table}') FROM {table}"
                ).fetchone()  # type: ignore[misc]
                print(f"| {table} | {rows:,} | {total:,} | {total / rows:,.0f} | {heap:,} "
                      f"| {index:,} |")  # fmt: skip
        print(f"\nwrote {args.items:,} items and attempts in {wall:.1f} s "
              f"({args.items / wall:,.0f} items + attempts/s, one connection each)")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
