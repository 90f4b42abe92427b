"""Scrapy's half of the parse benchmark; runs in the Scrapy venv (bench/_work/scrapy-venv).

Reads ``[[url, file], ...]`` from the JSON file given, loads every page into memory, then times
``--repeat`` passes of: an ``HtmlResponse``, ``LinkExtractor().extract_links`` and the product
extraction of bench/scrapy_spider.py. Prints one JSON object: pages, best pass seconds, links
and items found in a pass.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor


def one_pass(pages: list[tuple[str, bytes]], extractor: LinkExtractor) -> tuple[int, int]:
    links = items = 0
    for url, body in pages:
        response = HtmlResponse(url=url, body=body, encoding="utf-8")
        links += len(extractor.extract_links(response))
        article = response.css("article.product")
        if article:
            item = {
                "id": article.attrib.get("data-product_id"),
                "name": article.css("h1::text").get(),
                "price": article.css(".price::text").get(),
            }
            items += item["id"] is not None
    return links, items


def main() -> None:
    parser = argparse.ArgumentParser(description="Scrapy parse benchmark")
    parser.add_argument("pages_json", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    listing = json.loads(args.pages_json.read_text())
    pages = [(url, Path(file).read_bytes()) for url, file in listing]
    extractor = LinkExtractor()
    best_s = float("inf")
    links = items = 0
    for _ in range(args.repeat):
        start = time.perf_counter()
        links, items = one_pass(pages, extractor)
        best_s = min(best_s, time.perf_counter() - start)
    print(json.dumps({"pages": len(pages), "seconds": best_s, "links": links, "items": items}))


if __name__ == "__main__":
    main()
