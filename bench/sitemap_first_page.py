"""How long a crawl of a large sitemap index waits for its first page (decision 0052).

Usage:
    PYTHONPATH=src .venv/bin/python bench/sitemap_first_page.py [--children 2000] [--wait 60]

A loopback site whose /sitemap.xml lists ``--children`` child sitemaps of 5 page URLs each;
``crawlfleet crawl URL --sitemaps --max-pages 50`` runs at the default delay (1 s) for at
most ``--wait`` seconds. Printed: seconds from the command's start to the first page request
(the CLI's start-up included), and the child sitemaps the server had served by then.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from aiohttp import web

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def site(children: int, log: list[tuple[float, str]], base: list[str]) -> web.Application:
    async def any_path(request: web.Request) -> web.Response:
        log.append((time.monotonic(), request.path))
        path = request.path
        if path == "/sitemap.xml":
            locs = "".join(
                f"<sitemap><loc>{base[0]}/s/{n}.xml</loc></sitemap>" for n in range(children)
            )
            text = f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">{locs}</sitemapindex>'
            return web.Response(text=text, content_type="application/xml")
        if path.startswith("/s/"):
            n = path[3:].removesuffix(".xml")
            locs = "".join(f"<url><loc>{base[0]}/p/{n}-{k}</loc></url>" for k in range(5))
            text = f'<?xml version="1.0"?><urlset xmlns="{NS}">{locs}</urlset>'
            return web.Response(text=text, content_type="application/xml")
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        return web.Response(text="<title>page</title>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", any_path)
    return app


def serve(app: web.Application, base: list[str]) -> None:
    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        tcp = web.TCPSite(runner, "127.0.0.1", 0)
        await tcp.start()
        base.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        await asyncio.Event().wait()

    threading.Thread(target=asyncio.run, args=(main(),), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--children", type=int, default=2000)
    parser.add_argument("--wait", type=float, default=60.0)
    args = parser.parse_args()
    log: list[tuple[float, str]] = []
    base: list[str] = []
    serve(site(args.children, log, base), base)
    while not base:
        time.sleep(0.01)
    state = Path(tempfile.mkdtemp()) / "state"
    command = [sys.executable, "-m", "crawlfleet", "crawl", f"{base[0]}/", "--sitemaps"]
    command += ["--state", str(state), "--allow-private-addresses", "--max-pages", "50"]
    started = time.monotonic()
    crawl = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ
    )

    def first_page() -> float | None:
        pages = [at for at, path in list(log) if path == "/" or path.startswith("/p/")]
        return min(pages) if pages else None

    while first_page() is None and time.monotonic() - started < args.wait:
        time.sleep(0.05)
    crawl.kill()
    crawl.wait()
    first = first_page()
    read = sum(1 for _, path in list(log) if path.startswith("/s/"))
    shown = "none" if first is None else f"{first - started:.2f} s"
    print(
        f"children {args.children}: first page after {shown} ({read} child sitemaps read by then)"
    )


if __name__ == "__main__":
    main()
