"""The shop's JSON API: products in pages linked by an opaque cursor.

``GET /api/products?cursor=C&limit=N`` answers ``{"products": [...], "next_cursor": C2}``,
``next_cursor`` null on the last page (``limit`` 1 to 25, default 10). ``POST
/api/search`` takes a JSON body ``{"query": "garden", "cursor": null}`` and answers in the
same shape with the products whose name holds the query (any case). A bad cursor, limit or
body is a 400 with ``{"error": ...}``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from aiohttp import web

from crawlfleet.demosite.shop_data import PRODUCTS, Product

DEFAULT_LIMIT = 10
MAX_LIMIT = 25


def cursor_after(product_id: int) -> str:
    """The opaque cursor of the page that starts after ``product_id``."""
    return base64.urlsafe_b64encode(f"after:{product_id}".encode()).decode().rstrip("=")


def _after(cursor: str | None) -> int:
    """The product id a cursor starts after (0 for none); ``ValueError`` for a bad one."""
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError("bad cursor") from None
    prefix, _, number = text.partition(":")
    if prefix != "after" or not number.isdigit():
        raise ValueError("bad cursor")
    return int(number)


def product_json(product: Product) -> dict[str, Any]:
    amount = f"{product.price_pence // 100}.{product.price_pence % 100:02d}"
    return {
        "id": product.id,
        "name": product.name,
        "price": {"amount": amount, "currency": "GBP"},
        "category": product.category,
        "stock": product.stock,
        "url": product.url_path,
    }


def page_of(products: tuple[Product, ...], cursor: str | None, limit: int) -> dict[str, Any]:
    """One page of ``products`` after ``cursor``; ``ValueError`` for a bad cursor."""
    after = _after(cursor)
    rest = [p for p in products if p.id > after]
    shown = rest[:limit]
    more = len(rest) > limit
    return {
        "products": [product_json(p) for p in shown],
        "next_cursor": cursor_after(shown[-1].id) if more else None,
    }


def _bad(reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=400)


class ShopApi:
    """Request handlers of the API."""

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/api/products", self.products), web.post("/api/search", self.search)]

    async def products(self, request: web.Request) -> web.Response:
        limit_text = request.query.get("limit", str(DEFAULT_LIMIT))
        if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_LIMIT:
            return _bad(f"limit must be 1 to {MAX_LIMIT}")
        try:
            return web.json_response(
                page_of(PRODUCTS, request.query.get("cursor"), int(limit_text))
            )
        except ValueError as exc:
            return _bad(str(exc))

    async def search(self, request: web.Request) -> web.Response:
        try:
            query = await request.json()
        except ValueError:
            return _bad("the body must be JSON")
        if not isinstance(query, dict) or not isinstance(query.get("query"), str):
            return _bad('the body must be {"query": "...", "cursor": null}')
        words = query["query"].lower()
        found = tuple(p for p in PRODUCTS if words in p.name.lower())
        cursor = query.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            return _bad("bad cursor")
        try:
            return web.json_response(page_of(found, cursor, DEFAULT_LIMIT))
        except ValueError as exc:
            return _bad(str(exc))
