"""Distributed crawl throughput against the task granularity (leases per task, batch time).

Runs the generated static site (``gen_site.py``) behind a private nginx, a private
redis-server and PostgreSQL (the test fixtures' classes), W ``crawlfleet worker`` processes,
and the dispatcher in this process, once per (leases per task, batch seconds) pair. Prints
wall time, pages/s, tasks run and the access-log check (each page once).

    .venv/bin/python bench/distributed_bench.py --pages 2000 --workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench's flat imports

from crawl_bench import ensure_site
from nginx_server import NginxServer, read_log

from crawlfleet.clock import SystemClock
from crawlfleet.events import EventBus
from crawlfleet.runtime.celery.dispatched import open_crawl
from crawlfleet.runtime.celery.dispatcher import Dispatcher
from crawlfleet.settings import Settings
from tests.fixtures.postgres_server import PostgresServer, _bindir
from tests.fixtures.redis_server import RedisServer

WORK = Path(__file__).resolve().parent / "_work" / "distributed"
CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
PORT = 8897
TASK_DONE = re.compile(r"crawl_batch\[[^\]]+\] succeeded")


async def dispatch(settings: Settings, seeds: list[str], leases_per_task: int) -> None:
    clock, events = SystemClock(), EventBus()
    async with AsyncExitStack() as stack:
        crawl = await open_crawl(
            settings, seeds, broker_url=None, fresh=True, events=events, clock=clock, stack=stack
        )
        dispatcher = Dispatcher(crawl, clock=clock, events=events, leases_per_task=leases_per_task)
        result = await dispatcher.run()
        if not result.complete:
            raise RuntimeError(f"crawl did not complete: {result}")


def run_once(
    args: argparse.Namespace, seeds: list[str], redis: RedisServer, dsn: str, nginx: NginxServer,
    leases_per_task: int, batch_s: float, run: int,
) -> str:  # fmt: skip
    run_dir = WORK / f"run-{run}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    workers = []
    for n in range(args.workers):
        log = (run_dir / f"worker-{n}.log").open("wb")
        argv = [str(CRAWLFLEET), "worker", "--redis", redis.url, "--postgres", dsn]
        argv += ["--concurrency", str(args.concurrency), "--batch-s", str(batch_s)]
        argv += ["--loglevel", "INFO"]
        workers.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), log))
    logs = [run_dir / f"worker-{n}.log" for n in range(args.workers)]
    while not all("ready." in p.read_text(errors="replace") for p in logs):
        time.sleep(0.05)
    nginx.clear_log()
    settings = Settings.model_validate(
        {
            "redis_url": redis.url,
            "postgres_dsn": dsn,
            "crawl_id": f"bench-{run}",
            "delay_s": 0.0,
            "per_domain_concurrency": args.concurrency,
            "allow_private_addresses": True,
        }
    )
    started = time.monotonic()
    asyncio.run(dispatch(settings, seeds, leases_per_task))
    wall_s = time.monotonic() - started
    for process, log in workers:
        process.terminate()
        process.wait(timeout=60)
        log.close()
    requests = Counter((line.host, line.uri) for line in read_log(nginx.access_log))
    tasks = sum(len(TASK_DONE.findall(p.read_text(errors="replace"))) for p in logs)
    twice = sum(1 for (_, uri), n in requests.items() if n > 1 and uri != "/robots.txt")
    pages = sum(requests.values())
    return (
        f"| {leases_per_task} | {batch_s} | {pages} | {wall_s:.1f} | {pages / wall_s:.0f} "
        f"| {tasks} | {twice} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--grid", default="1:5,8:5,64:1,64:5,512:5", help="N:batch_s,...")
    args = parser.parse_args()
    site = WORK / "site"
    manifest = ensure_site(site, args.pages, args.hosts, PORT)
    bindir = _bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found")
    redis = RedisServer(WORK / "redis")
    postgres = PostgresServer(bindir)
    nginx = NginxServer(site, WORK / "nginx", list(manifest["hosts"]), PORT)
    redis.start()
    postgres.init()
    nginx.start()
    rows = [
        "| leases/task | batch s | requests | wall s | requests/s | tasks run | fetched twice |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    try:
        for run, cell in enumerate(args.grid.split(",")):
            n, batch_s = cell.split(":")
            postgres.psql(f"CREATE DATABASE b{run}")
            row = run_once(
                args, manifest["seeds"], redis, postgres.dsn(f"b{run}"), nginx,
                int(n), float(batch_s), run,
            )  # fmt: skip
            print(row, flush=True)
            rows.append(row)
    finally:
        nginx.stop()
        postgres.destroy()
        redis.stop()
    print(f"\n{args.workers} workers x {args.concurrency} pages in flight, {args.pages} pages")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
