"""ETA accuracy: the politeness-aware ETA vs the naive remaining ÷ rate, on a generated site.

One slow host (robots.txt ``Crawl-delay``) and several fast ones, each with a home page that
links to all its pages, crawled embedded on loopback. The ETA shown when the crawl is 25 %
and 50 % done (finished ÷ known, once every home page was read) is compared with the time
the crawl actually still took; the naive ETA's error is printed beside it.

    .venv/bin/python bench/eta_bench.py [--slow-pages 120] [--fast-pages 300] [--crawl-delay 0.1] [--delay 0.01]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from crawlfleet.api import Crawl
from crawlfleet.monitoring.stats import Sample
from crawlfleet.settings import Settings

SLOW_HOST = "127.0.0.20"
FAST_HOSTS = ("127.0.0.21", "127.0.0.22", "127.0.0.23", "127.0.0.24")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((SLOW_HOST, 0))
        return int(sock.getsockname()[1])


def site(pages: int, crawl_delay_s: float | None) -> web.Application:
    async def robots(request: web.Request) -> web.Response:
        delay = f"Crawl-delay: {crawl_delay_s:g}\n" if crawl_delay_s else ""
        return web.Response(text=f"User-agent: *\n{delay}Disallow:\n")

    async def home(request: web.Request) -> web.Response:
        links = "".join(f'<a href="/p/{n}">{n}</a> ' for n in range(pages))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        n = request.match_info["n"]
        return web.Response(text=f"<html><title>{n}</title></html>", content_type="text/html")

    app = web.Application()
    app.add_routes([web.get("/robots.txt", robots), web.get("/", home), web.get("/p/{n}", page)])
    return app


@dataclass(frozen=True)
class Point:
    at: float
    finished: int
    total: int
    eta_s: float | None
    naive_s: float | None
    bottleneck: str | None


async def run(args: argparse.Namespace) -> None:
    port = free_port()
    runners = []
    for host, pages, delay in [
        (SLOW_HOST, args.slow_pages, args.crawl_delay),
        *((h, args.fast_pages, None) for h in FAST_HOSTS),
    ]:
        runner = web.AppRunner(site(pages, delay), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        runners.append(runner)
    points: list[Point] = []

    def seen(sample: Sample) -> None:
        eta = sample.eta
        points.append(
            Point(time.time(), sample.finished, sample.finished + sample.counts.pending,
                  eta.eta_s, eta.naive_s, eta.bottleneck)
        )  # fmt: skip

    seeds = [f"http://{h}:{port}/" for h in (SLOW_HOST, *FAST_HOSTS)]
    with tempfile.TemporaryDirectory() as state:
        settings = Settings(
            state_dir=Path(state), allow_private_addresses=True, delay_s=args.delay,
            concurrency=16,
        )  # fmt: skip
        started = time.time()
        await Crawl(settings, seeds=seeds, on_progress=seen).run_async()
        ended = time.time()
    for runner in runners:
        await runner.cleanup()
    known = 1 + args.slow_pages + len(FAST_HOSTS) * (args.fast_pages + 1)
    print(f"site: {SLOW_HOST} {args.slow_pages} pages under Crawl-delay {args.crawl_delay} s; "
          f"{len(FAST_HOSTS)} hosts x {args.fast_pages} pages at delay {args.delay} s; "
          f"crawl took {ended - started:.1f} s")  # fmt: skip
    print("| done | ETA shown | actual remaining | error | naive ETA | naive error | bottleneck |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for share in (0.25, 0.5):
        point = next(
            p
            for p in points
            if p.total >= known - len(FAST_HOSTS) and p.finished >= share * p.total
        )
        actual = ended - point.at

        def err(value: float | None, actual: float = actual) -> str:
            return "-" if value is None else f"{(value - actual) / actual * 100:+.0f} %"

        def fmt(value: float | None) -> str:
            return "-" if value is None else f"{value:.1f} s"

        print(f"| {point.finished}/{point.total} | {fmt(point.eta_s)} | {actual:.1f} s | "
              f"{err(point.eta_s)} | {fmt(point.naive_s)} | {err(point.naive_s)} | "
              f"{point.bottleneck or '-'} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-pages", type=int, default=120)
    parser.add_argument("--fast-pages", type=int, default=300)
    parser.add_argument("--crawl-delay", type=float, default=0.1)
    parser.add_argument("--delay", type=float, default=0.01)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
