"""The shop role: a paginated product catalogue with noise links (categories, login, footer)."""

from __future__ import annotations

from html import escape

from aiohttp import web

from crawlfleet.demosite.catalogue import CatalogueEdits
from crawlfleet.demosite.pages import html_response, link, page, robots_response
from crawlfleet.demosite.roles import LAB, UrlFor
from crawlfleet.demosite.shop_data import (
    CATEGORIES,
    PAGE_COUNT,
    PRODUCTS,
    RATINGS,
    Product,
    category_path,
    products_in,
    products_on_page,
    slugify,
)

ROBOTS_TXT = "User-agent: *\nDisallow: /accounts/\n"


class Shop:
    """Request handlers of the shop; ``url_for`` makes the footer link to the lab host.

    ``edits`` are the catalogue's changes made while the site runs (prices, removals).
    """

    def __init__(self, url_for: UrlFor, edits: CatalogueEdits | None = None) -> None:
        self._url_for = url_for
        self._edits = edits if edits is not None else CatalogueEdits()

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/catalogue/page-{number:\\d+}.html", self.catalogue_page),
            web.get("/catalogue/category/{category}/index.html", self.category),
            web.get("/catalogue/{slug}_{product_id:\\d+}/index.html", self.product),
            web.get("/accounts/login/", self.login),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response(ROBOTS_TXT)

    async def home(self, request: web.Request) -> web.Response:
        body = (
            "<h1>All products</h1>\n"
            f"<p>{len(PRODUCTS)} products in {len(CATEGORIES)} categories.</p>\n"
            f"<p>{link('/catalogue/page-1.html', 'Browse the catalogue')}</p>"
        )
        return self._render("Demo Shop", body)

    async def catalogue_page(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        products = products_on_page(number)
        if not products:
            raise web.HTTPNotFound()
        products = self._edits.listed(products)
        pager = []
        if number > 1:
            pager.append(f'<li class="previous">{link(f"page-{number - 1}.html", "previous")}</li>')
        pager.append(f'<li class="current">Page {number} of {PAGE_COUNT}</li>')
        if number < PAGE_COUNT:
            pager.append(f'<li class="next">{link(f"page-{number + 1}.html", "next")}</li>')
        body = (
            f"<h1>All products</h1>\n{self._pods(products, '')}\n"
            f'<ul class="pager">{"".join(pager)}</ul>'
        )
        return self._render(f"All products | Page {number} of {PAGE_COUNT}", body)

    async def category(self, request: web.Request) -> web.Response:
        slugs = {slugify(c): c for c in CATEGORIES}
        category = slugs.get(request.match_info["category"])
        if category is None:
            raise web.HTTPNotFound()
        listed = self._edits.listed(products_in(category))
        body = f"<h1>{escape(category)}</h1>\n{self._pods(listed, '../../')}"
        return self._render(category, body)

    async def product(self, request: web.Request) -> web.Response:
        product = self._edits.product(int(request.match_info["product_id"]))
        if product is None or request.match_info["slug"] != product.slug:
            raise web.HTTPNotFound()
        return self._render(product.name, _product_detail(product))

    async def login(self, request: web.Request) -> web.Response:
        body = (
            "<h1>Log in</h1>\n"
            '<form method="post" action="/accounts/login/">'
            '<input name="username"><input name="password" type="password">'
            '<button type="submit">Log in</button></form>'
        )
        return self._render("Log in", body)

    def _pods(self, products: tuple[Product, ...], prefix: str) -> str:
        """Listing cards; product links are relative, ``prefix`` leads back to /catalogue/."""
        pods = []
        for p in products:
            href = f"{prefix}{p.slug}_{p.id}/index.html"
            pods.append(
                '<li><article class="product_pod">'
                f'<p class="star-rating {RATINGS[p.rating - 1]}"></p>'
                f'<h3><a href="{href}" title="{escape(p.name)}">{escape(p.name)}</a></h3>'
                f'<p class="price_color">{p.price_text}</p>'
                "</article></li>"
            )
        return '<ol class="row">\n' + "\n".join(pods) + "\n</ol>"

    def _render(self, title: str, main: str) -> web.Response:
        categories = "".join(f"<li>{link(category_path(c), c)}</li>" for c in CATEGORIES)
        body = (
            f'<header><a href="/">Demo Shop</a> | {link("/accounts/login/", "Login")}</header>\n'
            f'<aside><ul class="nav categories">{categories}</ul></aside>\n'
            f"<main>\n{main}\n</main>\n"
            f"<footer>{link(self._url_for(LAB, '/'), 'Crawler lab')}</footer>"
        )
        return html_response(page(f"{title} | Demo Shop", body))


def _product_detail(product: Product) -> str:
    rows = (
        ("UPC", product.upc),
        ("Product Type", "Books"),
        ("Price", product.price_text),
        ("Availability", product.availability),
    )
    table = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return (
        '<ul class="breadcrumb">'
        f'<li><a href="/">Home</a></li>'
        f"<li>{link(category_path(product.category), product.category)}</li>"
        f'<li class="active">{escape(product.name)}</li></ul>\n'
        f'<article class="product" data-product_id="{product.id}">\n'
        f"<h1>{escape(product.name)}</h1>\n"
        f'<p class="price_color">{product.price_text}</p>\n'
        f'<p class="instock availability">{product.availability}</p>\n'
        f'<p class="star-rating {RATINGS[product.rating - 1]}"></p>\n'
        f'<table class="table table-striped">{table}</table>\n'
        f'<div id="product_description"><p>{escape(product.name)} is a book about '
        f"{product.category.lower()}, number {product.id} in our catalogue.</p></div>\n"
        "</article>"
    )
