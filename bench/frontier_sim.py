"""Drive the Redis frontier with synthetic domains and link graphs, without fetching: the
figures behind docs/capacity.md.

Starts its own servers on free loopback ports (never the shared Redis): one redis-server, or
with ``--cluster`` three cluster primaries joined by ``redis-cli --cluster create``. Then:

1. **crawl sample**: ``--workers`` simulated workers run the crawl step against the store
   (``claim`` 32 leases; per lease ``add`` its links, then ``complete`` with a report), on a
   synthetic web of ``--domains`` domains: page ``i`` of a domain links to pages
   ``i*F+1 .. i*F+F`` of it (new URLs while the domain has room) and to ``--links - F``
   pages it has already linked (seen), one of them on another domain. Runs ``--pages``
   pages, then prints per page: Redis script calls and commands (``INFO commandstats``),
   Redis server CPU (``INFO cpu``, summed over the nodes), client CPU (this process: the
   frontier's share of a worker), and pages/s.
2. **memory per item**: ``MEMORY USAGE`` of each key family after the sample, per queued
   request, per seen URL, per domain and per lease.
3. **scale check**: admits synthetic URLs (never fetched) in batches until ``--urls`` are
   queued and seen, reads ``used_memory`` (summed over the nodes) at each tenth, and prints
   it beside the model's prediction from step 2: ``urls x (queued + seen) + domains x
   domain``.

    PYTHONPATH=src .venv/bin/python bench/frontier_sim.py --urls 1000000
    PYTHONPATH=src .venv/bin/python bench/frontier_sim.py --cluster --partitions 6 --dedup bloom
"""

from __future__ import annotations

import argparse
import asyncio
import random
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import redis

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.redis.crawl_store import open_crawl_store
from crawlfleet.frontier.redis.keys import FAMILIES, FIXED_KEYS
from crawlfleet.frontier.redis.partitioned import PartitionedQueueStore
from crawlfleet.frontier.redis.store import RedisQueueStore
from crawlfleet.frontier.store_types import Budget, DomainPolicy, Report, Signal
from crawlfleet.models import CrawlRequest, Lease
from crawlfleet.records import Attempt, Outcome
from crawlfleet.urls import fingerprint

REDIS = "/usr/bin/redis-server"
POLICY = DomainPolicy(delay_s=0.0, max_in_flight=4)
CLAIM = 32
LEASE_S = 300.0
ADMIT_BATCH = 1000
ADMITTERS = 4


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _port() -> int:
    while True:
        port = random.randrange(20_000, 55_000)
        if _bindable(port) and _bindable(port + 10_000):
            return port


@dataclass
class Servers:
    """The private redis-server processes and the URL of the whole."""

    processes: list[subprocess.Popen[bytes]]
    ports: list[int]
    url: str

    def clients(self) -> list[redis.Redis]:
        return [redis.Redis(port=port, decode_responses=True) for port in self.ports]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
            process.wait(timeout=30)


def start_servers(workdir: Path, cluster: bool) -> Servers:
    ports = [_port() for _ in range(3 if cluster else 1)]
    processes = []
    for port in ports:
        args = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no",
                "--dbfilename", f"{port}.rdb"]  # fmt: skip
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
        processes.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
    for port in ports:
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis(port=port).ping():
                    break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
    if not cluster:
        return Servers(processes, ports, f"redis://127.0.0.1:{ports[0]}/0")
    addresses = [f"127.0.0.1:{port}" for port in ports]
    subprocess.run(["redis-cli", "--cluster", "create", *addresses, "--cluster-yes"],
                   check=True, capture_output=True)  # fmt: skip
    for port in ports:
        while (
            "cluster_state:ok"
            not in redis.Redis(port=port).execute_command("CLUSTER", "INFO").decode()
        ):
            time.sleep(0.1)
    return Servers(processes, ports, "redis+cluster://" + ",".join(addresses))


@dataclass(frozen=True, slots=True)
class Web:
    """The synthetic link graph: ``domains`` domains of at most ``size`` pages each."""

    domains: int
    size: int
    links: int
    fanout: int

    def url(self, domain: int, page: int) -> str:
        return f"https://www.site{domain}.example/section/{page % 97}/page-{page}.html"

    def request(self, domain: int, page: int, depth: int = 0) -> CrawlRequest:
        url = self.url(domain, page)
        return CrawlRequest(url, fingerprint(url), f"www.site{domain}.example", depth=depth)

    def links_of(self, req: CrawlRequest, rng: random.Random) -> list[CrawlRequest]:
        domain = int(req.domain.split(".")[1].removeprefix("site"))
        page = int(req.url.rsplit("-", 1)[1].removesuffix(".html"))
        found = [
            self.request(domain, child, req.depth + 1)
            for child in range(page * self.fanout + 1, page * self.fanout + self.fanout + 1)
            if child < self.size
        ]
        old = self.links - len(found) - 1
        found += [self.request(domain, rng.randrange(page + 1), req.depth + 1) for _ in range(old)]
        found.append(self.request(rng.randrange(self.domains), 0, req.depth + 1))
        return found


def report(lease: Lease, now: float) -> Report:
    r = lease.request
    attempt = Attempt(r.url, r.fingerprint, r.domain, "sim:1", Outcome.OK, 200, 30_000, 0.2,
                      r.attempt, now)  # fmt: skip
    return Report(attempt, Signal.SUCCESS, "", {"items.stored.page": 1}, now)


def node_stats(servers: Servers) -> dict[str, float]:
    """Summed over the nodes: commands by name (calls), server CPU seconds, used_memory."""
    total: dict[str, float] = {}
    for client in servers.clients():
        with client:
            for name, stats in client.info("commandstats").items():
                total[name] = total.get(name, 0) + stats["calls"]
            cpu = client.info("cpu")
            total["cpu_s"] = total.get("cpu_s", 0) + cpu["used_cpu_user"] + cpu["used_cpu_sys"]
            total["used_memory"] = (
                total.get("used_memory", 0) + client.info("memory")["used_memory"]
            )
    return total


async def crawl_sample(
    store: QueueStore, web: Web, pages: int, workers: int, copy_attempts: bool
) -> int:
    """Run the crawl step on ``pages`` pages with ``workers`` concurrent simulated workers."""
    await store.add([web.request(d, 0) for d in range(web.domains)], Budget())
    done = 0
    rng = random.Random(1)

    async def worker() -> None:
        nonlocal done
        while done < pages:
            now = time.time()
            leases = await store.claim(CLAIM, now, LEASE_S, POLICY, ["http"])
            if not leases:
                await asyncio.sleep(0.001)
                continue
            for lease in leases:
                await store.add(web.links_of(lease.request, rng), Budget())
                await store.complete(lease, report(lease, now), POLICY)
                done += 1

    async def copier() -> None:  # the dispatcher's attempt copy: read, then trim
        while done < pages:
            rows = await store.pending_attempts(1000)
            await store.ack_attempts(len(rows))
            await asyncio.sleep(0.05)

    tasks = [worker() for _ in range(workers)] + ([copier()] if copy_attempts else [])
    await asyncio.gather(*tasks)
    return done


def inner_stores(store: QueueStore) -> list[RedisQueueStore]:
    if isinstance(store, PartitionedQueueStore):
        return store.partitions
    assert isinstance(store, RedisQueueStore)
    return [store]


def memory_per_item(servers: Servers, store: QueueStore) -> dict[str, float]:
    """``MEMORY USAGE`` of the key families, per queued request, seen URL, domain, lease."""
    usage: dict[str, int] = {}
    counts = {"queued": 0, "seen": 0, "domains": 0, "leased": 0}
    nodes = servers.clients()
    for inner in inner_stores(store):
        prefix = inner.keys.prefix
        for client in nodes:
            try:
                keys = list(client.scan_iter(match=inner.keys.pattern, count=10_000))
            except redis.ResponseError:
                continue
            for key in keys:
                try:
                    size = client.memory_usage(key, samples=0) or 0
                except redis.ResponseError:
                    continue
                name = key[len(prefix) + 1 :].split(":", 1)[0]
                usage[name] = usage.get(name, 0) + size
            for client_counts in [client.hgetall(inner.keys.key("counts"))] if keys else []:
                counts["queued"] += int(client_counts.get("queued", 0))
                counts["seen"] += int(client_counts.get("seen", 0))
                counts["leased"] += int(client_counts.get("leased", 0))
                counts["domains"] += int(client.zcard(inner.keys.key("admitted")))
    for client in nodes:
        client.close()
    unknown = set(usage) - set(FIXED_KEYS) - set(FAMILIES)
    assert not unknown, unknown
    queued = sum(usage.get(k, 0) for k in ("req", "order", "q", "errors", "delayed"))
    seen = usage.get("seen", 0) + usage.get("bloom", 0)
    domain = sum(usage.get(k, 0) for k in ("domain", "dstats", "admitted", "ready", "parked"))
    leases = usage.get("lease", 0) + usage.get("leases", 0)
    return {
        "queued_bytes": queued / max(1, counts["queued"] + counts["leased"]),
        "seen_bytes": seen / max(1, counts["seen"]),
        "domain_bytes": domain / max(1, counts["domains"]),
        "lease_bytes": leases / max(1, counts["leased"]),
        "queued": counts["queued"],
        "seen": counts["seen"],
        "domains": counts["domains"],
        "leased": counts["leased"],
        "other_bytes": sum(usage.values()) - queued - seen - domain - leases,
    }


async def admit_to(store: QueueStore, web: Web, urls: int, checkpoint: Any) -> None:
    """Admit synthetic never-fetched URLs until ``urls`` are seen; ``checkpoint(n)`` at each
    tenth (the sample's URLs count)."""
    seen = (await store.counts()).seen
    step = max(ADMIT_BATCH, urls // 10)
    next_mark = (seen // step + 1) * step
    page = web.size  # beyond the sample's pages: all new
    lock = asyncio.Lock()

    async def admitter() -> None:
        nonlocal page, seen, next_mark
        while True:
            async with lock:
                if seen >= urls:
                    return
                first, page = page, page + ADMIT_BATCH
            batch = [web.request(n % web.domains, first + n) for n in range(ADMIT_BATCH)]
            admitted = await store.add(batch, Budget())
            async with lock:
                seen += admitted
                if seen >= next_mark:
                    next_mark += step
                    await asyncio.to_thread(checkpoint, seen)

    await asyncio.gather(*(admitter() for _ in range(ADMITTERS)))


async def main(args: argparse.Namespace) -> None:
    web = Web(args.domains, args.domain_size, args.links, args.fanout)
    dedup: Literal["exact", "bloom"] = args.dedup
    with tempfile.TemporaryDirectory(prefix="frontier-sim-") as tmp:
        servers = start_servers(Path(tmp), args.cluster)
        try:
            await run(args, web, dedup, servers)
        finally:
            servers.stop()


async def run(
    args: argparse.Namespace, web: Web, dedup: Literal["exact", "bloom"], servers: Servers
) -> None:
    store = await open_crawl_store(
        servers.url, "sim", partitions=args.partitions, dedup=dedup,
        bloom_capacity=args.urls + args.pages * args.fanout + web.domains,
    )  # fmt: skip
    where = "3-node cluster" if args.cluster else "one server"
    print(f"# frontier_sim: {where}, {args.partitions} partition(s), dedup={dedup}, "
          f"{web.domains} domains, {web.links} links/page ({web.fanout} new)")  # fmt: skip
    base = await asyncio.to_thread(node_stats, servers)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    pages = await crawl_sample(store, web, args.pages, args.workers, copy_attempts=True)
    client_cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    after = await asyncio.to_thread(node_stats, servers)
    delta = {k: after.get(k, 0) - base.get(k, 0) for k in after}
    scripts = delta.get("cmdstat_evalsha", 0) + delta.get("cmdstat_eval", 0)
    commands = sum(v for k, v in delta.items() if k.startswith("cmdstat_"))
    print("\n## crawl sample (per page)\n")
    print("| pages | pages/s | script calls | Redis commands (incl. in scripts) "
          "| Redis CPU µs | client CPU µs |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| {pages} | {pages / wall:,.0f} | {scripts / pages:.2f} | {commands / pages:.1f} "
          f"| {delta['cpu_s'] / pages * 1e6:.0f} | {client_cpu / pages * 1e6:.0f} |")  # fmt: skip
    per = await asyncio.to_thread(memory_per_item, servers, store)
    print("\n## memory per item (MEMORY USAGE after the sample)\n")
    print("| queued request B | seen URL B | domain B | lease B | queued | seen | domains |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {per['queued_bytes']:.0f} | {per['seen_bytes']:.1f} | {per['domain_bytes']:.0f} "
          f"| {per['lease_bytes']:.0f} | {per['queued']:,} | {per['seen']:,} "
          f"| {per['domains']:,} |")  # fmt: skip
    if args.urls <= per["seen"]:
        await store.close()
        return
    empty = base["used_memory"]

    def predicted(urls: int, queued: int) -> float:
        return (
            empty
            + queued * per["queued_bytes"]
            + urls * per["seen_bytes"]
            + per["domains"] * per["domain_bytes"]
        )

    print("\n## scale check: admitted URLs (queued, never fetched)\n")
    print("| URLs seen | queued | used_memory MB | model MB | model error | admit s |")
    print("| --- | --- | --- | --- | --- | --- |")
    started = time.perf_counter()

    def checkpoint(_: int) -> None:
        counts = asyncio.run_coroutine_threadsafe(store.counts(), loop).result()
        used = node_stats(servers)["used_memory"]
        model = predicted(counts.seen, counts.queued + counts.leased)
        print(f"| {counts.seen:,} | {counts.queued:,} | {used / 1e6:,.0f} | {model / 1e6:,.0f} "
              f"| {(model - used) / used:+.1%} | {time.perf_counter() - started:,.0f} |",
              flush=True)  # fmt: skip

    loop = asyncio.get_running_loop()
    await admit_to(store, web, args.urls, checkpoint)
    await store.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=10_000_000, help="URLs seen at the end")
    parser.add_argument("--pages", type=int, default=20_000, help="pages of the crawl sample")
    parser.add_argument("--domains", type=int, default=10_000)
    parser.add_argument("--domain-size", type=int, default=100_000, help="pages per domain")
    parser.add_argument("--links", type=int, default=30, help="links per page")
    parser.add_argument("--fanout", type=int, default=5, help="new links per page")
    parser.add_argument("--workers", type=int, default=8, help="simulated workers")
    parser.add_argument("--dedup", choices=("exact", "bloom"), default="exact")
    parser.add_argument("--cluster", action="store_true", help="3 cluster primaries")
    parser.add_argument("--partitions", type=int, default=None)
    args = parser.parse_args(argv)
    if args.partitions is None:
        args.partitions = 6 if args.cluster else 1
    return args


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
