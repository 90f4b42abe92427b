"""Crawlee for Python's PlaywrightCrawler on the demo site's JS pages (run by browser_bench.py).

Runs in its own venv (bench/_work/crawlee-venv: crawlee[playwright]==1.11.0), launching
Debian's Chromium (/usr/bin/chromium) with the flags crawlfleet uses. Images, fonts and
media are blocked (``block_requests``), as crawlfleet blocks them; Crawlee's browser
fingerprint injection is turned off (crawlfleet does none). Writes the items as JSON lines.

    crawlee-venv/bin/python bench/crawlee_browser.py --out items.jsonl --pages 4 SEED
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from crawlee import ConcurrencySettings
from crawlee.crawlers import (
    PlaywrightCrawler,
    PlaywrightCrawlingContext,
    PlaywrightPreNavCrawlingContext,
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=4, help="concurrent pages")
    parser.add_argument("seeds", nargs="+")
    args = parser.parse_args()
    crawler = PlaywrightCrawler(
        headless=True,
        browser_type="chromium",
        browser_launch_options={"executable_path": "/usr/bin/chromium", "args": FLAGS},
        fingerprint_generator=None,
        concurrency_settings=ConcurrencySettings(
            min_concurrency=args.pages, max_concurrency=args.pages, desired_concurrency=args.pages
        ),
        max_request_retries=3,
    )
    items: list[dict[str, str]] = []

    @crawler.pre_navigation_hook
    async def block(context: PlaywrightPreNavCrawlingContext) -> None:
        await context.block_requests()

    @crawler.router.default_handler
    async def handle(context: PlaywrightCrawlingContext) -> None:
        page = context.page
        if "/items/" in context.request.url:
            await page.wait_for_selector(".name", state="attached")
            name = await page.text_content(".name")
            price = await page.text_content(".price")
            items.append(
                {
                    "key": context.request.url.rsplit("/", 1)[1],
                    "name": name or "",
                    "price": price or "",
                }
            )
            return
        await page.wait_for_selector("#app h1", state="attached")
        await context.enqueue_links(selector="a.item, a.next")

    await crawler.run(args.seeds)
    with args.out.open("w") as out:
        for item in items:
            out.write(json.dumps(item) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
