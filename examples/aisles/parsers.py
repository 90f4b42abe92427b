"""The aisles example: a product's category, known only on the listing, carried as context.

The demo shop's aisles (``/aisles/``) list products by category; an item page
(``/items/<id>/``) shows no category at all. ``aisle`` reads the category from its heading
and gives every item link it as context (``Link(url, data={...})``); ``item`` reads it back
as ``response.context["category"]``. The context is stored with the request in the
frontier, so it survives a restart or a retry, in either runtime.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing.plugins import Follow, Link, parser
from crawlfleet.parsing.response import Response

SHOP_HOST = "127.0.0.2"  # the demo shop, on any port


@parser(SHOP_HOST, pattern="/aisles/", follow=[Follow(pattern=r"/aisles/\d+/$")])
def aisles(response: Response) -> None:
    """The aisle index: its follow rule takes each aisle's first page."""


@parser(SHOP_HOST, pattern=r"re:^/aisles/\d+/", follow=[Follow(css="a.next")])
def aisle(response: Response) -> Iterator[Link]:
    """An aisle page: its items, each with the aisle's category; the next page by the rule."""
    heading = response.css_first("h1")
    category = heading.text(strip=True) if heading is not None else None
    for node in response.css("li.card a"):
        yield Link(node.attributes.get("href") or "", data={"category": category})


@parser(SHOP_HOST, pattern="/items/*", item_type="item")
def item(response: Response) -> dict[str, Any]:
    """One ``item``: what its page shows, and the category its aisle gave."""
    article = response.css_first("article.item")
    if article is None:
        return {}
    return {
        "key": article.attributes.get("data-id"),
        "name": _text(response, "article.item h1"),
        "price": _text(response, "article.item p.price"),
        "category": response.context["category"],
    }


def _text(response: Response, css: str) -> str | None:
    node = response.css_first(css)
    return node.text(strip=True) if node is not None else None
