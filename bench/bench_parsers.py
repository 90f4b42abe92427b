"""crawlfleet parsers for the benchmark site: the product on product pages, links everywhere.

crawlfleet crawl ... --parsers bench/bench_parsers.py

``BENCH_FETCHER=impersonate`` makes the follow rules queue their links for that fetcher kind
(``bench/impersonate_bench.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing.plugins import Follow, parser
from crawlfleet.parsing.response import Response

FETCHER = os.environ.get("BENCH_FETCHER") or None


@parser(pattern="/p/*", item_type="product", follow=[Follow(fetcher=FETCHER)])
def bench_product(response: Response) -> Iterator[dict[str, Any]]:
    """The product (id, name, price) of a product page; every link is followed."""
    article = response.css_first("article.product")
    if article is None:
        return
    name = article.css_first("h1")
    price = article.css_first(".price")
    product_id = article.attributes.get("data-product_id")
    yield {
        "key": product_id,
        "id": product_id,
        "name": name.text(strip=True) if name is not None else None,
        "price": price.text(strip=True) if price is not None else None,
        "url": response.url,
    }


@parser(follow=[Follow(fetcher=FETCHER)])
def bench_pages(response: Response) -> None:
    """Listing, home and about pages: no item, every link followed."""
