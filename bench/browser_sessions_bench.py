"""Browser sessions benchmark: what a browser context per crawl session costs.

With ``[crawl.proxies]`` every browser page runs in its crawl session's own context (its proxy
and User-Agent); without, the pool's page slots share ``browser_sessions`` (1) contexts. This
fetches the demo site's jsapp pages (``/``, ``/list/2..3``, ``/items/1..60``) with one
``BrowserFetcher`` (4 concurrent pages, images/fonts/media blocked) three ways, alternately:

- ``shared``: no session (one shared context, today's default);
- ``sessions-1``: through one tinyproxy, every page in one session (one session context);
- ``sticky-4``: through one tinyproxy, 4 sessions, each of the 4 workers keeps one;
- ``turns-4``: through one tinyproxy, page n in session n mod 4 (a crawl session pool's
  turn-by-turn choice: a free page slot is often in another session's context).

Per run: pages/s (pages the access log shows / wall seconds), peak RSS of the Chromium
process tree (sampled every 100 ms), and a check that each page was fetched exactly once.

    .venv/bin/python bench/browser_sessions_bench.py --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
from collections import Counter
from pathlib import Path

from results import write_section
from tinyproxy_server import TinyproxyServer

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.jsapp import JS_ITEMS, JS_LISTS
from crawlfleet.fetchers.browser.fetcher import BrowserFetcher
from crawlfleet.fetchers.browser.guard import RequestGuard
from crawlfleet.fetchers.browser.memory import tree_rss_bytes
from crawlfleet.fetchers.browser.pool import BrowserPool
from crawlfleet.fetchers.browser.slots import PoolLimits
from crawlfleet.fetchers.profiles import profile
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest
from crawlfleet.urls import fingerprint

BENCH = Path(__file__).resolve().parent
WORK = BENCH / "_work" / "browser_sessions"
PATHS = ["/", *(f"/list/{n}" for n in range(2, JS_LISTS + 1))] + [
    f"/items/{n}" for n in range(1, JS_ITEMS + 1)
]
MODES = ("shared", "sessions-1", "sticky-4", "turns-4")
PAGES = 4
PROFILE = profile("chrome-131-linux").as_dict()


def session_of(mode: str, page: int, worker: int) -> str | None:
    if mode == "shared":
        return None
    if mode == "sessions-1":
        return "s0"
    return f"s{worker if mode == 'sticky-4' else page % 4}"


async def run(site: ThreadedDemoSite, proxy: str, mode: str) -> tuple[float, float, int]:
    """(pages/s, peak MB, pages the server saw more or less than once)."""
    pool = BrowserPool(
        Path("/usr/bin/chromium"),
        PoolLimits(pages=PAGES),
        RequestGuard(None, ("image", "font", "media")),
    )
    fetcher = BrowserFetcher(pool, wait_for=lambda url: "css:h1", timeout_s=30,
                             max_body_bytes=10**7)  # fmt: skip
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            if pool._current is not None:
                peak[0] = max(peak[0], tree_rss_bytes(pool._current.marker))

    site.clear_log()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for n, path in enumerate(PATHS):
        queue.put_nowait((n, site.url("jsapp", path)))

    async def worker(number: int) -> None:
        while not queue.empty():
            n, url = queue.get_nowait()
            session = session_of(mode, n, number)
            via = None if session is None else Via(proxy, None, PROFILE, session, {})
            request = CrawlRequest(url, fingerprint(url), "jsapp", fetcher="browser")
            await fetcher.fetch(request, via=via)

    started = time.perf_counter()
    await asyncio.gather(*(worker(number) for number in range(PAGES)))
    wall_s = time.perf_counter() - started
    done.set()
    sampler.join()
    await fetcher.close()
    seen = Counter(r.path for r in site.log if r.role == "jsapp" and r.path in set(PATHS))
    wrong = sum(1 for path in PATHS if seen[path] != 1)
    return len(PATHS) / wall_s, peak[0] / 1024**2, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    figures: dict[str, list[tuple[float, float, int]]] = {mode: [] for mode in MODES}
    with ThreadedDemoSite() as site, TinyproxyServer(WORK, bind="127.0.1.60") as proxy:
        for _ in range(args.runs):
            for mode in MODES:
                figures[mode].append(asyncio.run(run(site, proxy.url, mode)))
                rate, mb, wrong = figures[mode][-1]
                print(f"{mode:>11}: {rate:5.2f} pages/s, peak {mb:6.0f} MB, wrong {wrong}")
    lines = [
        "| mode | pages/s (median) | peak RSS of Chromium's tree, MB (median) | pages not"
        " fetched exactly once |",
        "| --- | --- | --- | --- |",
    ]
    for mode, runs in figures.items():
        lines.append(
            f"| {mode} | {statistics.median(r[0] for r in runs):.2f} "
            f"| {statistics.median(r[1] for r in runs):.0f} | {sum(r[2] for r in runs)} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.write:
        write_section(BENCH / "RESULTS.md", "Browser sessions: a context per crawl session", table)


if __name__ == "__main__":
    main()
