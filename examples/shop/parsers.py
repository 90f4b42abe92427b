"""The shop example: product records from the demo shop (a books-to-scrape-like catalogue).

Two parsers share the host. ``listing`` reads the home page and the paginated catalogue and
follows only two kinds of link: product pages (first) and the next catalogue pages (after);
category, login and off-site links are dropped. ``product`` turns a product page into one
``product`` item keyed by the page's ``data-product_id``.

The demo shop always listens on 127.0.0.2 (the port varies), and a parser's ``domain`` is
matched against the host only, so ``domain=SHOP_HOST`` claims the shop on any port. For a real
site, put its domain there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from crawlfleet.parsing import Contract, Expect, Follow, Response, parser
from crawlfleet.pipeline.prices import parse_price

SHOP_HOST = "127.0.0.2"
SAMPLE = f"http://{SHOP_HOST}:8800"  # `crawlfleet demo-site` on its default port

PRODUCT_PATH = r"/catalogue/[^/]+_\d+/index\.html$"
LISTING_PATH = r"/catalogue/page-\d+\.html$"
RATINGS = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}


class Price(BaseModel):
    amount: str = Field(pattern=r"^\d+\.\d{2}$", description="exact decimal, e.g. '51.77'")
    currency: str = Field(pattern=r"^[A-Z]{3}$", description="ISO 4217 code")


class Product(BaseModel):
    id: int = Field(ge=1)
    name: str = Field(min_length=1)
    price: Price
    availability: int = Field(ge=0, description="copies in stock; 0 = out of stock")
    rating: int = Field(ge=1, le=5)
    url: str


@parser(
    SHOP_HOST,
    pattern=f"re:^/$|^{LISTING_PATH}",
    follow=[
        Follow(pattern=PRODUCT_PATH, css="article.product_pod", priority=10),
        Follow(pattern=LISTING_PATH, priority=0),
    ],
    sample_url=f"{SAMPLE}/catalogue/page-1.html",
    contract=Contract(max_items=0, min_links=11),
)
def listing(response: Response) -> None:
    """No items: the ``follow`` rules pick the product and next-page links."""


@parser(
    SHOP_HOST,
    pattern=f"re:^{PRODUCT_PATH}",
    item_type="product",
    schema=Product,
    sample_url=f"{SAMPLE}/catalogue/the-silent-river_1/index.html",
    contract=Contract(min_items=1, max_items=1, required_fields=["id", "name", "price"]),
    # a product page without its article is a changed template, not a product: `mismatch`
    expect=Expect(selectors=["article.product h1"], fields=["id", "name"], min_items=1),
)
def product(response: Response) -> Iterator[dict[str, Any]]:
    """One ``product`` item; price as {"amount": "51.77", "currency": "GBP"}."""
    article = response.css_first("article.product")
    if article is None:
        return
    product_id = article.attributes.get("data-product_id")
    yield {
        "key": product_id,
        "id": product_id,
        "name": _text(response, "article.product h1"),
        "price": _price(_text(response, "article.product p.price_color")),
        "availability": _stock(_text(response, "article.product p.availability")),
        "rating": _rating(response),
        "url": response.url,
    }


def _text(response: Response, css: str) -> str | None:
    node = response.css_first(css)
    return node.text(strip=True) if node is not None else None


def _price(text: str | None) -> dict[str, str | None] | None:
    """None when there is no price: the schema then rejects the item, naming the field."""
    price = parse_price(text) if text else None
    return price.to_dict() if price is not None else None


def _stock(text: str | None) -> int | None:
    """``"In stock (7 available)"`` -> 7, ``"Out of stock"`` -> 0."""
    if text is None:
        return None
    found = re.search(r"\((\d+) available\)", text)
    return int(found.group(1)) if found else 0 if "out of stock" in text.lower() else None


def _rating(response: Response) -> int | None:
    node = response.css_first("article.product p.star-rating")
    classes = (node.attributes.get("class") or "").split() if node is not None else []
    return next((RATINGS[name] for name in classes if name in RATINGS), None)
