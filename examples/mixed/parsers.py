"""The mixed example: one host whose ``/static/`` products read the same over plain HTTP and
whose ``/app/`` products only exist once a script ran. Both parsers say ``fetcher="auto"``:
the crawl fetches a few pages of each both ways, learns per parser which fetcher gives the
same items and links (``status`` shows it as ``auto:static_product=http`` and
``auto:app_product=browser``), and fetches the rest of each pattern that way.

The demo site's mixed host always listens on 127.0.0.15 (the port varies).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing import Follow, Response, parser

MIXED_HOST = "127.0.0.15"
PRODUCTS = Follow(pattern=r"/(static|app)/\d+$")


def product(response: Response) -> Iterator[dict[str, Any]]:
    name, price = response.css_first(".name"), response.css_first(".price")
    if name is not None and price is not None:
        yield {"key": response.url.split("/", 3)[3], "name": name.text(), "price": price.text()}


@parser(MIXED_HOST, pattern="/", follow=[PRODUCTS])
def mixed_home(response: Response) -> None:
    """The home page (plain HTML, fetched over HTTP): its product links are followed."""


@parser(MIXED_HOST, pattern="/static/*", item_type="product", fetcher="auto", follow=[PRODUCTS])
def static_product(response: Response) -> Iterator[dict[str, Any]]:
    yield from product(response)


@parser(MIXED_HOST, pattern="/app/*", item_type="product", fetcher="auto", follow=[PRODUCTS])
def app_product(response: Response) -> Iterator[dict[str, Any]]:
    yield from product(response)
