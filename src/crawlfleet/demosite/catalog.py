"""The catalog roles: one product catalogue served by two hosts, one of which is redesigned.

``catalog`` and ``redesign`` serve the same ``CATALOG_ITEMS`` products at ``/item/<n>``
(``/`` lists them all; every item links the next three). Before its redesign an item
page reads ``<div class="product"><h1 class="name">…</h1><p class="price">…</p></div>``;
after it, ``<article class="card"><h2 class="title">…</h2><span class="cost">…</span>``
(classes renamed, the name moved to another element). ``catalog`` never changes;
``redesign`` switches after ``Redesign.after_pages`` item pages (None: never), the page
that crosses the count and every later one served in the new design.
"""

from __future__ import annotations

import threading
from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, page, robots_response

CATALOG_ITEMS = 120
LINKS_PER_ITEM = 3


def item_name(number: int) -> str:
    return f"Catalog item {number}"


def item_price(number: int) -> str:
    return f"{number}.99"


class Redesign:
    """The redesign switch: after how many item pages the templates change (thread-safe)."""

    def __init__(self, after_pages: int | None = None) -> None:
        self._lock = threading.Lock()
        self.after_pages = after_pages
        self.served = 0

    def set(self, after_pages: int | None) -> None:
        """Switch after ``after_pages`` more item pages (None: never); the count starts over."""
        with self._lock:
            self.after_pages = after_pages
            self.served = 0

    def next_is_new(self) -> bool:
        """Count one item page; whether it is served in the new design."""
        with self._lock:
            self.served += 1
            return self.after_pages is not None and self.served > self.after_pages


class Catalog:
    """Request handlers of a catalog role (``redesign`` None: never redesigned)."""

    def __init__(self, redesign: Redesign | None = None) -> None:
        self._redesign = redesign

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/item/{number:\\d+}", self.item),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response("User-agent: *\nDisallow:\n")

    async def home(self, request: web.Request) -> web.Response:
        numbers = range(1, CATALOG_ITEMS + 1)
        links = "".join(f'<li><a href="/item/{n}">item {n}</a></li>' for n in numbers)
        return html_response(page("Catalog", f"<h1>Catalog</h1><ul>{links}</ul>"))

    async def item(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= CATALOG_ITEMS:
            raise web.HTTPNotFound()
        name, price = escape(item_name(number)), item_price(number)
        if self._redesign is not None and self._redesign.next_is_new():
            body = f'<article class="card"><h2 class="title">{name}</h2>'
            body += f'<span class="cost">{price}</span></article>'
        else:
            body = f'<div class="product"><h1 class="name">{name}</h1>'
            body += f'<p class="price">{price}</p></div>'
        following = range(number + 1, min(number + LINKS_PER_ITEM, CATALOG_ITEMS) + 1)
        nav = "".join(f'<a href="/item/{n}">item {n}</a> ' for n in following)
        return html_response(page(item_name(number), f"{body}<nav>{nav}</nav>"))
