"""The HTTP fetcher against servers whose head never ends: time to fail, memory, loop stall.

A subprocess on 127.0.0.1 answers every connection with a status line and then, as fast as
the client reads, one of: an endless header line (``line``), endless header lines (``lines``),
or a chunked body whose trailer never ends (``trailer``). This process runs ``-c`` fetches at
once on uvloop (the crawl's loop) with ``HttpFetcher`` and prints how long until every one
failed, the first error, the peak growth of this process's RSS (sampled every 5 ms) and per
connection, and the longest the event loop was kept from a 5 ms ticker (issue #35 item 2,
decision 0045).

    PYTHONPATH=src .venv/bin/python bench/hostile_heads.py --kind line -c 100
    PYTHONPATH=src .venv/bin/python bench/hostile_heads.py --kind line -c 1 --total-s 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time

import uvloop

HEADS = {
    "line": (b"HTTP/1.1 200 OK\r\nX-Endless: ", b"a" * 65536),
    "lines": (b"HTTP/1.1 200 OK\r\n", (b"X-Same: " + b"v" * 200 + b"\r\n") * 300),
    "trailer": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: ",
        b"t" * 65536,
    ),
}


def serve(port: int, kind: str) -> None:
    """Answer every request with ``kind``'s head, without end, until killed."""
    first, piece = HEADS[kind]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(first)
            while True:
                writer.write(piece)
                await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
        print("ready", flush=True)
        async with server:
            await server.serve_forever()

    uvloop.run(main())


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def attack(port: int, connections: int, total_s: float) -> None:
    from crawlfleet.errors import FetchError
    from crawlfleet.fetchers import HttpFetcher
    from crawlfleet.fetchers.options import FetchOptions
    from crawlfleet.models import CrawlRequest

    options = FetchOptions(
        allow_private_addresses=True,
        connect_timeout_s=min(10.0, total_s),
        read_timeout_s=min(10.0, total_s),
        total_timeout_s=total_s,
        max_idle_per_origin=connections,
    )
    fetcher = HttpFetcher(options)
    loop = asyncio.get_running_loop()
    start_rss = peak_rss = _rss_bytes()
    lag_s = 0.0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal peak_rss, lag_s
        while not done.is_set():
            before = loop.time()
            await asyncio.sleep(0.005)
            lag_s = max(lag_s, loop.time() - before - 0.005)
            peak_rss = max(peak_rss, _rss_bytes())

    async def fetch(n: int) -> str:
        url = f"http://127.0.0.1:{port}/{n}"
        request = CrawlRequest(url=url, fingerprint=str(n), domain="d")
        try:
            await fetcher.fetch(request)
        except FetchError as exc:
            return str(exc).replace(url, "<url>")
        return "fetched (no error)"

    watcher = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    errors = await asyncio.gather(*(fetch(n) for n in range(connections)))
    wall_s, cpu_s = time.perf_counter() - wall0, time.process_time() - cpu0
    done.set()
    await watcher
    await fetcher.close()
    growth = peak_rss - start_rss
    print(f"{connections} connections: all failed in {wall_s:.2f} s wall, {cpu_s:.2f} s CPU")
    print(f"first error: {errors[0]}")
    print(
        f"peak RSS growth {growth / 2**20:.1f} MiB, {growth / connections / 1024:.0f} KiB a connection"
    )
    print(f"longest loop stall {lag_s * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=sorted(HEADS), default="line")
    parser.add_argument("-c", "--connections", type=int, default=100)
    parser.add_argument("--total-s", type=float, default=60.0, help="the fetch's total timeout")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.kind)
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--kind", args.kind],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()
        uvloop.run(attack(port, args.connections, args.total_s))
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(5)


if __name__ == "__main__":
    main()
