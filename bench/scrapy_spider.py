"""The Scrapy side of the crawl benchmark; runs in its own venv (bench/_work/scrapy-venv).

A CrawlSpider that follows every link on the benchmark hosts and writes one JSONL item per
product page (id, name, price). Settings are the benchmark's: robots.txt obeyed, 64
concurrent requests overall and per domain, no delay, no autothrottle, no HTTP cache.

    bench/_work/scrapy-venv/bin/python bench/scrapy_spider.py --out items.jsonl SEED [SEED ...]
    (--max-pages N: close after N responses, as corpus_bench.py bounds every crawler)
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy.crawler import CrawlerProcess
from scrapy.http import Request, Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "CONCURRENT_REQUESTS": 64,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
    "DOWNLOAD_DELAY": 0,
    "AUTOTHROTTLE_ENABLED": False,
    "HTTPCACHE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "TELNETCONSOLE_ENABLED": False,
}


class ShopSpider(CrawlSpider):
    """Follow every link within the seed hosts; extract the product on product pages."""

    name = "bench_shop"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, seeds: list[str], **kwargs: Any) -> None:
        self.start_urls = seeds
        self.allowed_domains = sorted({urlsplit(s).hostname or "" for s in seeds})
        super().__init__(**kwargs)

    async def start(self) -> AsyncIterator[Request]:
        # Filtered like any request (Scrapy's default start requests skip the dupefilter, so
        # each home page would be fetched again when a page links back to it).
        for url in self.start_urls:
            yield Request(url)

    def parse_page(self, response: Response) -> Iterator[dict[str, str | None]]:
        article = response.css("article.product")
        if article:
            yield {
                "id": article.attrib.get("data-product_id"),
                "name": article.css("h1::text").get(),
                "price": article.css(".price::text").get(),
                "url": response.url,
            }


def main() -> None:
    parser = argparse.ArgumentParser(description="Scrapy crawl of the benchmark site")
    parser.add_argument("--out", required=True, help="JSONL file for the items")
    parser.add_argument("--max-pages", type=int, default=0, help="CLOSESPIDER_PAGECOUNT (0: none)")
    parser.add_argument("seeds", nargs="+")
    args = parser.parse_args()
    process = CrawlerProcess(
        {
            **SETTINGS,
            "CLOSESPIDER_PAGECOUNT": args.max_pages,
            "FEEDS": {args.out: {"format": "jsonlines", "overwrite": True}},
        }
    )
    process.crawl(ShopSpider, seeds=args.seeds)
    process.start()


if __name__ == "__main__":
    main()
