"""Client CPU per page of the PostgreSQL sink, written as a distributed worker writes.

Starts a private PostgreSQL (the tests' ``PostgresServer``; never the shared server), then
writes ``--pages`` pages of one product item each through ``PostgresSink.write_page`` with
``--concurrency`` pages in flight (a worker's pages share the sink's group commits), after
200 pages of warm-up. Prints the process's CPU per page (the sink's client side: psycopg,
the event loop), the server's (the postmaster's children that ended: each run's backend) and
pages/s. Give several ``--src`` trees to compare them, each in its own
process, in alternation.

With ``--attempts``, writes one attempt a page instead, through the attempt log
(``PostgresAttemptLog.record``) in batches of 500, as the dispatcher copies them.

    PYTHONPATH=. .venv/bin/python bench/postgres_sink.py --src src ../base/src --runs 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent


async def write_pages(dsn: str, pages: int, concurrency: int) -> tuple[float, float]:
    """(CPU µs per page, pages/s) of writing ``pages`` pages."""
    from crawlfleet.models import Item
    from crawlfleet.pipeline.sinks.postgres import PostgresSink

    sink = await PostgresSink.open(dsn, crawl_id="bench")
    slots = asyncio.Semaphore(concurrency)

    async def one(n: int) -> None:
        async with slots:
            data = {"id": str(n), "name": f"product {n}", "price": "1.00"}
            item = Item(type="product", data=data, key=str(n), url=f"http://shop.test/p/{n}")
            await sink.write_page([item], item.url, [("product", str(n))])

    for n in range(200):
        await one(-1 - n)
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(pages)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await sink.close()
    return cpu / pages * 1e6, pages / wall


async def record_attempts(dsn: str, pages: int) -> tuple[float, float]:
    """(CPU µs per attempt, attempts/s) of copying ``pages`` attempts, 500 at a time."""
    from crawlfleet.monitoring.attempt_copier import BATCH
    from crawlfleet.monitoring.postgres_attempt_log import PostgresAttemptLog
    from crawlfleet.records import Attempt, Outcome

    log = await PostgresAttemptLog.open(dsn, crawl_id="bench")
    at = time.time()
    attempts = [
        Attempt(
            url=f"http://shop.test/p/{n}",
            fingerprint=f"{n:016x}",
            domain="shop.test",
            worker="bench:1",
            outcome=Outcome.OK,
            status=200,
            bytes=20_000,
            latency_s=0.01,
            retry=0,
            at=at + n / 1000,
        )
        for n in range(-200, pages)
    ]
    await log.record(attempts[:200])
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(200, len(attempts), BATCH):
        await log.record(attempts[start : start + BATCH])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await log.close()
    return cpu / pages * 1e6, pages / wall


def child(dsn: str, pages: int, concurrency: int, attempts: bool) -> None:
    if attempts:
        cpu_us, rate = asyncio.run(record_attempts(dsn, pages))
    else:
        cpu_us, rate = asyncio.run(write_pages(dsn, pages, concurrency))
    print(f"{cpu_us:.0f} {rate:.0f}")


def server_cpu_s(data_dir: Path) -> float:
    """CPU seconds of the postmaster and of its children that ended (``/proc``)."""
    pid = (data_dir / "postmaster.pid").read_text().split()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--src", nargs="+", type=Path, default=[BENCH.parent / "src"])
    parser.add_argument("--attempts", action="store_true", help="the attempt log instead")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pages, args.concurrency, args.attempts)
        return
    sys.path.insert(0, str(BENCH.parent))
    from tests.fixtures.postgres_server import benchmark_postgres

    with benchmark_postgres() as server:
        print(f"| tree | run | client CPU µs a page | server CPU µs a page | pages/s |  "
              f"({args.pages} pages, {args.concurrency} in flight)")  # fmt: skip
        print("| --- | --- | --- | --- | --- |")
        for run in range(1, args.runs + 1):
            for index, src in enumerate(args.src):
                database = f"bench_{run}_{index}"
                server.psql(f"CREATE DATABASE {database}")
                dsn = server.dsn(database)
                env = {**os.environ, "PYTHONPATH": str(src.resolve())}
                migrate = f"from crawlfleet.pipeline.sinks.postgres_schema import migrate; migrate({dsn!r})"
                subprocess.run([sys.executable, "-c", migrate], check=True, env=env)
                argv = [sys.executable, __file__, "--child", dsn, "--pages", str(args.pages)]
                argv += ["--concurrency", str(args.concurrency)]
                argv += ["--attempts"] if args.attempts else []
                before = server_cpu_s(server.data)
                out = subprocess.run(argv, check=True, env=env, capture_output=True, text=True)
                server_us = (server_cpu_s(server.data) - before) / (args.pages + 200) * 1e6
                cpu_us, rate = out.stdout.split()
                print(f"| {src} | {run} | {cpu_us} | {server_us:.0f} | {rate} |")


if __name__ == "__main__":
    main()
