"""Changes a test makes to the shop's catalogue while the site runs, and HTTP validators.

``CatalogueEdits`` reprices or removes products (a removed product's page answers 404 and it
leaves the listings); ``reset`` restores the fixed catalogue. ``edit_routes`` lets another
process make them (``crawlfleet demo-site edit``): ``POST /_demo/catalogue`` with the form
fields ``reset``, ``reprice=ID:PENCE`` and ``remove=ID`` (repeatable), answered with one line
per change made, or 400 and the reason. A crawl never sends it (it only GETs). The shop answers conditional
requests (``conditional``): every 200 HTML page carries an ``ETag`` (a hash of its body) and
a request whose ``If-None-Match`` names it gets a 304 without a body.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import replace
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from multidict import MultiDictProxy

from crawlfleet.demosite.shop_data import PRODUCTS, Product


class CatalogueEdits:
    """Price changes and removals over ``PRODUCTS``; safe to change from another thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._prices: dict[int, int] = {}
        self._removed: set[int] = set()

    def reprice(self, product_id: int, price_pence: int) -> None:
        with self._lock:
            self._prices[product_id] = price_pence

    def remove(self, product_id: int) -> None:
        with self._lock:
            self._removed.add(product_id)

    def reset(self) -> None:
        with self._lock:
            self._prices.clear()
            self._removed.clear()

    def product(self, product_id: int) -> Product | None:
        """The product as the site shows it now; None when it is removed or unknown."""
        if not 1 <= product_id <= len(PRODUCTS):
            return None
        with self._lock:
            if product_id in self._removed:
                return None
            price = self._prices.get(product_id)
        base = PRODUCTS[product_id - 1]
        return base if price is None else replace(base, price_pence=price)

    def listed(self, products: tuple[Product, ...]) -> tuple[Product, ...]:
        """``products`` as shown now, removed ones left out."""
        shown = (self.product(p.id) for p in products)
        return tuple(p for p in shown if p is not None)


EDIT_PATH = "/_demo/catalogue"


def edit_routes(edits: CatalogueEdits) -> list[web.RouteDef]:
    """The ``POST EDIT_PATH`` route applying its form's edits to ``edits``."""

    async def edit(request: web.Request) -> web.Response:
        form = await request.post()
        try:
            done = _apply(edits, form)
        except ValueError as exc:
            return web.Response(status=400, text=f"{exc}\n")
        return web.Response(text="".join(f"{line}\n" for line in done))

    return [web.post(EDIT_PATH, edit)]


def _apply(edits: CatalogueEdits, form: MultiDictProxy[Any]) -> list[str]:
    """Check every edit of ``form``, then make them; ``ValueError`` names the first bad one."""
    getall = form.getall
    reprices: list[tuple[Product, int]] = []
    for value in getall("reprice", []):
        product_id, sep, pence = str(value).partition(":")
        if not sep or not product_id.isdigit() or not pence.isdigit():
            raise ValueError(f"reprice {value!r}: write ID:PENCE, e.g. 4:1399")
        reprices.append((_known(int(product_id)), int(pence)))
    removals: list[Product] = []
    for value in getall("remove", []):
        if not str(value).isdigit():
            raise ValueError(f"remove {value!r}: write a product ID, e.g. 21")
        removals.append(_known(int(str(value))))
    done: list[str] = []
    if "reset" in form:
        edits.reset()
        done.append(f"reset: the {len(PRODUCTS)} products as shipped")
    for product, new_pence in reprices:
        edits.reprice(product.id, new_pence)
        done.append(f"repriced {product.id} ({product.url_path}): {new_pence} pence")
    for product in removals:
        edits.remove(product.id)
        done.append(f"removed {product.id} ({product.url_path}): now 404")
    return done


def _known(product_id: int) -> Product:
    if not 1 <= product_id <= len(PRODUCTS):
        raise ValueError(f"no product {product_id}: the shop has 1..{len(PRODUCTS)}")
    return PRODUCTS[product_id - 1]


def conditional() -> Middleware:
    """An aiohttp middleware: an ``ETag`` on every 200 page, a 304 when the client has it."""

    @web.middleware
    async def validate(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        if request.method != "GET" or response.status != 200:
            return response
        if not isinstance(response, web.Response) or response.body is None:
            return response
        body = response.body if isinstance(response.body, bytes) else b""
        etag = f'"{hashlib.sha1(body).hexdigest()[:20]}"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        response.headers["ETag"] = etag
        return response

    return validate
