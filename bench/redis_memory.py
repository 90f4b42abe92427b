"""Memory of the Redis seen filter per 1M URLs: exact SET against the Bloom bitmap.

Starts a private redis-server on a free loopback port (never the shared one), inserts N real
fingerprints through ``RedisQueueStore.add`` (requests of 5,000 domains), batched
and several batches in flight, once with ``dedup="exact"`` and once with ``dedup="bloom"``
(capacity N), then prints ``MEMORY USAGE`` of the keys (the SET; every Bloom shard) scaled to
1M URLs, the growth of Redis' ``used_memory`` (everything the crawl keeps for 1M queued and
seen URLs: requests, lanes, domains, seen filter), the measured Bloom false-positive rate on fresh fingerprints, and whether the Bloom
filter meets its target: at most ``TARGET_MB_PER_1M`` (decimal MB) per 1M URLs at 1 %.

    .venv/bin/python bench/redis_memory.py              # 1,000,000 fingerprints, 1% error
    .venv/bin/python bench/redis_memory.py --count 200000
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

from redis.asyncio import Redis

from crawlfleet.frontier.redis import BloomGeometry, CrawlKeys, RedisQueueStore
from crawlfleet.frontier.redis.bloom import SHARD_BYTES
from crawlfleet.frontier.store_types import Budget, DomainPolicy
from crawlfleet.models import CrawlRequest
from crawlfleet.urls import fingerprint

REDIS_BINARY = "/usr/bin/redis-server"
BATCH = 1000
IN_FLIGHT = 4
FP_PROBES = 100_000
TARGET_MB_PER_1M = 1.3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = [REDIS_BINARY, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(workdir), "--daemonize", "no"]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.02)


def fingerprints(count: int, tag: str) -> list[str]:
    return [fingerprint(f"https://site{i % 5000}.example/{tag}/page/{i}") for i in range(count)]


async def insert(
    url: str, prefix: str, dedup: Literal["exact", "bloom"], fps: list[str], error_rate: float
) -> RedisQueueStore:
    store = await RedisQueueStore.open(
        url,
        prefix,
        policy=DomainPolicy(delay_s=0.0, max_in_flight=1),  # only admits: no claim reads it
        dedup=dedup,
        bloom_capacity=len(fps),
        bloom_error_rate=error_rate,
    )
    requests = [
        CrawlRequest(
            url=f"https://site{i % 5000}.example/{fp}", fingerprint=fp, domain=f"d{i % 5000}"
        )
        for i, fp in enumerate(fps)
    ]
    batches = [requests[i : i + BATCH] for i in range(0, len(requests), BATCH)]
    for start in range(0, len(batches), IN_FLIGHT):
        await asyncio.gather(*(store.add(b, Budget()) for b in batches[start : start + IN_FLIGHT]))
    return store


async def bench(url: str, count: int, error_rate: float) -> None:
    client = Redis.from_url(url)
    fps = fingerprints(count, "seen")
    per_million = 1_000_000 / count
    print(f"{count:,} fingerprints, Bloom error rate {error_rate:.2%}")
    head = f"{'path':<8}{'keys':>6}{'insert s':>10}{'MiB/1M':>10}{'MB/1M':>10}{'seen':>12}"
    print(f"{head}{'all MB/1M':>12}")
    bloom_mb = 0.0
    for dedup in ("exact", "bloom"):
        prefix = f"bench-{dedup}"
        keys = CrawlKeys(prefix)
        geometry = BloomGeometry.for_capacity(count, error_rate)
        names = (
            [keys.key("seen")]
            if dedup == "exact"
            else [keys.bloom_shard(i) for i in range(geometry.shards)]
        )
        before_b = int((await client.info("memory"))["used_memory"])
        started = time.perf_counter()
        store = await insert(url, prefix, dedup, fps, error_rate)
        elapsed_s = time.perf_counter() - started
        used_b = sum([int(await client.memory_usage(n, samples=0) or 0) for n in names])
        used = used_b * per_million
        seen = (await store.counts()).seen
        grown_b = int((await client.info("memory"))["used_memory"]) - before_b
        print(
            f"{dedup:<8}{len(names):>6}{elapsed_s:>10.1f}{used / 2**20:>10.2f}{used / 1e6:>10.2f}"
            f"{seen:>12,}{grown_b * per_million / 1e6:>12.1f}"
        )
        if dedup == "bloom":
            bloom_mb = used / 1e6
            bitmap = b"".join(v if isinstance(v, bytes) else b"" for v in await client.mget(names))
            probes = fingerprints(min(FP_PROBES, count), "fresh")
            false_positives = sum(
                all(bitmap[p >> 3] & (0x80 >> (p & 7)) for p in geometry.positions(fp))
                for fp in probes
            )
            print(
                f"bloom: m={geometry.bits:,} bits in {geometry.shards} shards of "
                f"{SHARD_BYTES:,} B, k={geometry.hashes}, "
                f"false positives {false_positives / len(probes):.3%} on {len(probes):,} fresh"
            )
        await store.close()
    await client.aclose()
    met = "met" if bloom_mb <= TARGET_MB_PER_1M else "NOT met"
    print(
        f"target <= {TARGET_MB_PER_1M} MB per 1M URLs at {error_rate:.0%}: {met} "
        f"({bloom_mb:.3f} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--error-rate", type=float, default=0.01)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="redis-bench-") as workdir:
        process, url = start_redis(Path(workdir))
        try:
            asyncio.run(bench(url, options.count, options.error_rate))
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
