"""The scrapy-redis side of the distributed benchmark; runs in the Scrapy venv.

The crawl benchmark's spider (same link rule and product extraction) on scrapy-redis: the
scheduler's queue and the dupefilter live in Redis, shared by every process started with the
same ``--redis``/``--key``. Seeds are read from the list ``<key>:start_urls`` as JSON
``{"url": ...}`` and go through the dupefilter like any request (scrapy-redis' default start
requests skip it, so a home page linked back to would be fetched twice). A process closes
after ``--idle-s`` seconds with nothing to do.

    bench/_work/scrapy-venv/bin/python bench/scrapy_redis_spider.py --redis URL --key K \
        --out items-0.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from scrapy.crawler import CrawlerProcess
from scrapy.http import Request, Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import Rule
from scrapy_redis.spiders import RedisCrawlSpider
from scrapy_spider import SETTINGS


class RedisShopSpider(RedisCrawlSpider):
    """Follow every link within ``allowed``; extract the product on product pages."""

    name = "bench_shop_redis"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, allowed: list[str], **kwargs: Any) -> None:
        self.allowed_domains = allowed
        super().__init__(**kwargs)

    def make_request_from_data(self, data: bytes) -> Request:
        return Request(json.loads(data)["url"])  # filtered, as the crawlfleet seeds are

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
    parser = argparse.ArgumentParser(description="scrapy-redis crawl of the benchmark site")
    parser.add_argument("--out", required=True, help="JSONL file for this process's items")
    parser.add_argument("--redis", required=True, help="redis:// URL of the shared scheduler")
    parser.add_argument("--key", required=True, help="the crawl's key prefix in Redis")
    parser.add_argument("--idle-s", type=int, default=3)
    parser.add_argument("allowed", nargs="+", help="allowed host names")
    args = parser.parse_args()
    settings = {
        **SETTINGS,
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": args.redis,
        "SCHEDULER_QUEUE_KEY": f"{args.key}:requests",
        "SCHEDULER_DUPEFILTER_KEY": f"{args.key}:dupefilter",
        "REDIS_START_URLS_KEY": f"{args.key}:start_urls",
        "MAX_IDLE_TIME_BEFORE_CLOSE": args.idle_s,
        "FEEDS": {args.out: {"format": "jsonlines", "overwrite": True}},
    }
    process = CrawlerProcess(settings)
    process.crawl(RedisShopSpider, allowed=args.allowed)
    process.start()


if __name__ == "__main__":
    main()
