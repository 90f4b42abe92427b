"""Compare async HTTP clients: pages/s and client CPU ms per page against a local server.

A raw-asyncio HTTP/1.1 keep-alive server runs in a subprocess on 127.0.0.1 and serves the same
~10 KB HTML page for every path; each client fetches N distinct URLs with C concurrent tasks in
this process, on uvloop (the crawl's event loop, decision 0030). CPU is this process's
user+system time (``time.process_time``), so server work is not counted. Every run is bounded
by ``--max-s`` seconds. ``raw`` is the floor: a bare protocol that reads a Content-Length
response and nothing more (no parser, no limits, no errors).

    .venv/bin/python bench/http_clients.py                 # all clients, N=3000, C=64
    .venv/bin/python bench/http_clients.py -n 1000 -c 32 --clients aiohttp,crawlfleet
    .venv/bin/python bench/http_clients.py --clients crawlfleet,impersonate   # decision 0018
    .venv/bin/python bench/http_clients.py --clients aiohttp,crawlfleet --proxy   # decision 0060

``--proxy``: every client (but ``raw``) goes through a private tinyproxy
(``bench/tinyproxy_server.py``), which closes each client connection after its response, so
a page is a connection to the proxy; the proxy's CPU is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import uvloop
from tinyproxy_server import TinyproxyServer

PAGE = (
    b"<!doctype html><html><head><title>bench</title></head><body>"
    + b"".join(
        b'<p><a href="/page/%d">link %d</a> lorem ipsum dolor sit amet</p>\n' % (i, i)
        for i in range(150)
    )
)[: 10 * 1024] + b"</body></html>"
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: keep-alive\r\n\r\n" % len(PAGE)
) + PAGE


class _PageProtocol(asyncio.Protocol):
    """Answers every complete request head on the connection with RESPONSE."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            self.buffer = self.buffer[end + 4 :]
            self.transport.write(RESPONSE)


def serve(port: int) -> None:
    """Run the page server until killed."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_PageProtocol, "127.0.0.1", port, backlog=1024)
        print("ready", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Figures:
    client: str
    pages: int
    wall_s: float
    cpu_s: float

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_s / self.pages


FetchOne = Callable[[str], Awaitable[int]]


async def drive(fetch: FetchOne, urls: list[str], concurrency: int) -> int:
    """Fetch every URL with ``concurrency`` workers; the number of bytes received."""
    pending = iter(urls)
    total = 0

    async def worker() -> None:
        nonlocal total
        for url in pending:
            received = await fetch(url)
            total += received

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total


async def run_aiohttp(urls: list[str], concurrency: int, proxy: str | None) -> int:
    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def fetch(url: str) -> int:
            async with session.get(url, proxy=proxy) as response:
                return len(await response.read())

        return await drive(fetch, urls, concurrency)


async def run_httpx(urls: list[str], concurrency: int, proxy: str | None) -> int:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, proxy=proxy) as client:

        async def fetch(url: str) -> int:
            return len((await client.get(url)).content)

        return await drive(fetch, urls, concurrency)


async def run_curl_cffi(urls: list[str], concurrency: int, proxy: str | None) -> int:
    from curl_cffi.requests import AsyncSession

    async with AsyncSession(max_clients=concurrency, proxy=proxy) as session:

        async def fetch(url: str) -> int:
            return len((await session.get(url)).content)

        return await drive(fetch, urls, concurrency)


async def run_crawlfleet(urls: list[str], concurrency: int, proxy: str | None) -> int:
    from crawlfleet.fetchers.http import HttpFetcher
    from crawlfleet.fetchers.options import FetchOptions
    from crawlfleet.fetchers.protocols import Via
    from crawlfleet.models import CrawlRequest

    options = FetchOptions(max_idle_per_origin=concurrency, allow_private_addresses=True)
    fetcher = HttpFetcher(options)
    via = Via(proxy) if proxy is not None else None
    try:

        async def fetch(url: str) -> int:
            request = CrawlRequest(url=url, fingerprint="", domain="127.0.0.1")
            return len((await fetcher.fetch(request, via=via)).body)

        return await drive(fetch, urls, concurrency)
    finally:
        await fetcher.close()


async def run_impersonate(urls: list[str], concurrency: int, proxy: str | None) -> int:
    from crawlfleet.fetchers.impersonate import ImpersonateFetcher
    from crawlfleet.fetchers.options import FetchOptions
    from crawlfleet.fetchers.protocols import Via
    from crawlfleet.models import CrawlRequest

    options = FetchOptions(max_idle_per_origin=concurrency, allow_private_addresses=True)
    fetcher = ImpersonateFetcher(options)
    via = Via(proxy) if proxy is not None else None
    try:

        async def fetch(url: str) -> int:
            request = CrawlRequest(url=url, fingerprint="", domain="127.0.0.1")
            return len((await fetcher.fetch(request, via=via)).body)

        return await drive(fetch, urls, concurrency)
    finally:
        await fetcher.close()


class _RawConnection(asyncio.Protocol):
    """Reads one Content-Length response at a time into ``reply``."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.reply: asyncio.Future[int] | None = None
        self.end = 0
        self.size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.end:
            head = self.buffer.find(b"\r\n\r\n")
            if head < 0:
                return
            length = self.buffer.lower().index(b"content-length:") + 15
            self.size = int(self.buffer[length : self.buffer.index(b"\r\n", length)])
            self.end = head + 4 + self.size
        if len(self.buffer) >= self.end and self.reply is not None:
            del self.buffer[: self.end]
            self.end = 0
            reply, self.reply = self.reply, None
            reply.set_result(self.size)


async def run_raw(urls: list[str], concurrency: int, proxy: str | None) -> int:
    if proxy is not None:
        raise NotImplementedError("no proxy in the floor")
    loop = asyncio.get_running_loop()
    idle: list[_RawConnection] = []
    port = int(urls[0].rsplit(":", 1)[1].split("/", 1)[0])

    async def fetch(url: str) -> int:
        path = url.split(f":{port}", 1)[1]
        if idle:
            connection = idle.pop()
        else:
            _, connection = await loop.create_connection(_RawConnection, "127.0.0.1", port)
        connection.reply = loop.create_future()
        connection.transport.write(  # type: ignore[attr-defined]
            b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n" % path.encode()
        )
        received = await connection.reply
        idle.append(connection)
        return received

    return await drive(fetch, urls, concurrency)


CLIENTS: dict[str, Callable[[list[str], int, str | None], Awaitable[int]]] = {
    "raw": run_raw,
    "aiohttp": run_aiohttp,
    "crawlfleet": run_crawlfleet,
    "httpx": run_httpx,
    "curl_cffi": run_curl_cffi,
    "impersonate": run_impersonate,
}


def measure(
    name: str, urls: list[str], concurrency: int, max_s: float, proxy: str | None
) -> Figures | str:
    """Run one client in a fresh event loop; figures, or why it could not run."""
    runner = CLIENTS[name]

    async def bounded() -> int:
        return await asyncio.wait_for(runner(urls, concurrency, proxy), max_s)

    wall0, cpu0 = time.perf_counter(), time.process_time()
    try:
        received = uvloop.run(bounded())
    except ImportError as exc:
        return f"not installed ({exc.name})"
    except TimeoutError:
        return f"did not finish in {max_s:.0f} s"
    except NotImplementedError as exc:
        return str(exc)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    if received < len(urls) * len(PAGE):
        return f"short read: {received} bytes"
    return Figures(name, len(urls), wall, cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--pages", type=int, default=3000)
    parser.add_argument("-c", "--concurrency", type=int, default=64)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--max-s", type=float, default=60.0, help="bound per client run")
    parser.add_argument("--proxy", action="store_true", help="through a private tinyproxy")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port)], stdout=subprocess.PIPE, text=True
    )
    proxying = contextlib.ExitStack()
    try:
        assert server.stdout is not None
        server.stdout.readline()
        proxy = None
        if args.proxy:
            where = Path(__file__).resolve().parent / "_work" / "http_clients_tinyproxy"
            proxy = proxying.enter_context(TinyproxyServer(where, bind="127.0.1.70")).url
        urls = [f"http://127.0.0.1:{port}/page/{i}" for i in range(args.pages)]
        through = f", through tinyproxy {proxy}" if proxy else ""
        print(f"N={args.pages} pages of {len(PAGE)} B, {args.concurrency} concurrent{through}")
        print(f"{'client':<12} {'pages/s':>9} {'CPU ms/page':>12} {'wall s':>8}")
        for name in args.clients.split(","):
            # A short warm-up run so imports and first connections are not counted.
            measure(name, urls[:100], args.concurrency, args.max_s, proxy)
            result = measure(name, urls, args.concurrency, args.max_s, proxy)
            if isinstance(result, str):
                print(f"{name:<12} {result}")
            else:
                print(
                    f"{name:<12} {result.pages_per_s:>9.0f} "
                    f"{result.cpu_ms_per_page:>12.3f} {result.wall_s:>8.2f}"
                )
    finally:
        proxying.close()
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(5)


if __name__ == "__main__":
    main()
