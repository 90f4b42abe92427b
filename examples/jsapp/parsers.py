"""The jsapp example: pages whose content and links a script writes, and a JS cookie challenge.

Every parser here names ``fetcher="browser"``: the pages they read are rendered by Debian's
Chromium (the browser fetcher) before the parser sees them. ``wait`` says when a page is
ready: the list and item pages once their script filled ``#app``; the guarded quotes once the
challenge's script has set its cookie and reloaded to the real page (an ``h1`` only the real
page has).

The demo site's jsapp host always listens on 127.0.0.14 (the port varies).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing import Follow, Response, parser

JSAPP_HOST = "127.0.0.14"


@parser(
    JSAPP_HOST,
    pattern=r"re:^/(list/\d+)?$",
    fetcher="browser",
    wait="css:#app h1",
    follow=[Follow(pattern=r"/items/\d+$"), Follow(pattern=r"/list/\d+$")],
)
def js_list(response: Response) -> None:
    """A list page: its item and next-page links are followed (the rules), no item."""


@parser(JSAPP_HOST, pattern="/items/*", item_type="js_item", fetcher="browser", wait="css:.name")
def js_item(response: Response) -> Iterator[dict[str, Any]]:
    name, price = response.css_first(".name"), response.css_first(".price")
    if name is not None and price is not None:
        yield {"key": response.url.rsplit("/", 1)[1], "name": name.text(), "price": price.text()}


@parser(
    JSAPP_HOST,
    pattern="/challenge/*",
    item_type="guarded_quote",
    fetcher="browser",
    wait="css:h1",
    follow=[Follow(pattern=r"/challenge/q/\d+$")],
)
def guarded(response: Response) -> Iterator[dict[str, Any]]:
    quote = response.css_first(".quote")
    found = re.search(r"/q/(\d+)$", response.url)
    if quote is not None and found is not None:
        yield {"key": found.group(1), "text": quote.text()}
