"""The shop's aisles: listings that alone name a product's category.

``/aisles/`` links each category as an aisle (``/aisles/<n>/``, numbered from 1, the name
only in the link text); an aisle page shows its category as its heading and lists its
products, ``PAGE_SIZE`` a page (``?page=2``, a "next" link), each linking ``/items/<id>/``.
An item page shows the product's name, price, UPC and availability, and no category: a
crawler that wants it carries it from the aisle (a link's context).
"""

from __future__ import annotations

from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, link, page
from crawlfleet.demosite.shop_data import CATEGORIES, PRODUCTS, Product, products_in

PAGE_SIZE = 5


def aisle_path(category: str) -> str:
    return f"/aisles/{CATEGORIES.index(category) + 1}/"


def item_path(product: Product) -> str:
    return f"/items/{product.id}/"


class ShopAisles:
    """Request handlers of the aisles and items."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/aisles/", self.index),
            web.get("/aisles/{number:\\d+}/", self.aisle),
            web.get("/items/{product_id:\\d+}/", self.item),
        ]

    async def index(self, request: web.Request) -> web.Response:
        links = "".join(f"<li>{link(aisle_path(c), c)}</li>" for c in CATEGORIES)
        body = f'<h1>Aisles</h1>\n<ul class="aisles">{links}</ul>'
        return html_response(page("Aisles | Demo Shop", body))

    async def aisle(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= len(CATEGORIES):
            raise web.HTTPNotFound()
        category = CATEGORIES[number - 1]
        products = products_in(category)
        page_text = request.query.get("page", "1")
        page_number = int(page_text) if page_text.isdigit() else 0
        shown = products[(page_number - 1) * PAGE_SIZE : page_number * PAGE_SIZE]
        if page_number < 1 or not shown:
            raise web.HTTPNotFound()
        cards = "".join(
            f'<li class="card">{link(item_path(p), p.name)} '
            f'<span class="price">{p.price_text}</span></li>'
            for p in shown
        )
        pager = ""
        if page_number * PAGE_SIZE < len(products):
            pager = link(f"?page={page_number + 1}", "next", css_class="next")
        body = f'<h1>{escape(category)}</h1>\n<ul class="cards">{cards}</ul>\n{pager}'
        return html_response(page(f"{category} | Demo Shop", body))

    async def item(self, request: web.Request) -> web.Response:
        product_id = int(request.match_info["product_id"])
        if not 1 <= product_id <= len(PRODUCTS):
            raise web.HTTPNotFound()
        p = PRODUCTS[product_id - 1]
        body = (
            f'<article class="item" data-id="{p.id}">\n'
            f"<h1>{escape(p.name)}</h1>\n"
            f'<p class="price">{p.price_text}</p>\n'
            f'<p class="upc">{p.upc}</p>\n'
            f'<p class="availability">{escape(p.availability)}</p>\n'
            "</article>"
        )
        return html_response(page(f"{p.name} | Demo Shop", body))
