"""The Crawlee side of the corpus benchmark: Crawlee for Python's ParselCrawler (HTTP, no browser).

Runs in its own venv (bench/_work/crawlee-venv: crawlee[parsel]==1.11.0, its default HTTP
client). Follows every ``<a href>`` of the seed's host (``enqueue_links``, same hostname),
robots.txt obeyed, ``--concurrency`` requests at once (min = max = desired, so the autoscaler
cannot go below), no delay, at most ``--max-pages`` requests. Storage goes to
``CRAWLEE_STORAGE_DIR``.

    crawlee-venv/bin/python bench/crawlee_http.py --concurrency 64 --max-pages N SEED
"""

from __future__ import annotations

import argparse
import asyncio

from crawlee import ConcurrencySettings
from crawlee.crawlers import ParselCrawler, ParselCrawlingContext


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("seed")
    args = parser.parse_args()
    n = args.concurrency
    crawler = ParselCrawler(
        concurrency_settings=ConcurrencySettings(
            min_concurrency=n, max_concurrency=n, desired_concurrency=n
        ),
        respect_robots_txt_file=True,
        max_requests_per_crawl=args.max_pages,
    )

    @crawler.router.default_handler
    async def handle(context: ParselCrawlingContext) -> None:
        await context.enqueue_links(strategy="same-hostname")

    await crawler.run([args.seed])


if __name__ == "__main__":
    asyncio.run(main())
