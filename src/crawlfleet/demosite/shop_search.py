"""The shop's search form: a POST form with a CSRF token, its results in pages of POSTs.

``GET /search/`` shows ``<form id="search" method="post" action="results">`` with a hidden
``csrf_token``, a text field ``q`` and a ``category`` select. ``POST /search/results``
answers 403 without a token this site issued, else the products whose name holds ``q`` (any
case), in the category when one is given, ``PAGE_SIZE`` a page (``page`` field, from 1).
A page with more results after it ends with ``<form class="more">``: the same search's next
page, as hidden fields (a fresh token included).
"""

from __future__ import annotations

import secrets
from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, link, page
from crawlfleet.demosite.shop_data import CATEGORIES, PRODUCTS, Product

PAGE_SIZE = 5


def search(query: str, category: str = "") -> tuple[Product, ...]:
    """The products a search finds, in catalogue order."""
    words = query.lower()
    return tuple(
        p for p in PRODUCTS if words in p.name.lower() and (not category or p.category == category)
    )


def _hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{escape(name)}" value="{escape(value)}">'


class ShopSearch:
    """Request handlers of the search; remembers the tokens it issued."""

    def __init__(self) -> None:
        self._tokens: set[str] = set()

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/search/", self.form), web.post("/search/results", self.results)]

    def _token(self) -> str:
        token = secrets.token_urlsafe(12)
        self._tokens.add(token)
        return token

    async def form(self, request: web.Request) -> web.Response:
        options = "".join(f"<option>{escape(c)}</option>" for c in CATEGORIES)
        body = (
            "<h1>Search the shop</h1>\n"
            '<form id="search" method="post" action="results">'
            f"{_hidden('csrf_token', self._token())}"
            '<input name="q" placeholder="title words">'
            f'<select name="category"><option value="">Any category</option>{options}</select>'
            '<button type="submit">Search</button></form>'
        )
        return html_response(page("Search | Demo Shop", body))

    async def results(self, request: web.Request) -> web.Response:
        fields = await request.post()
        token = str(fields.get("csrf_token", ""))
        if token not in self._tokens:
            return html_response(page("Forbidden", "<h1>CSRF token missing or invalid</h1>"), 403)
        query = str(fields.get("q", "")).strip()
        category = str(fields.get("category", ""))
        number_text = str(fields.get("page", "1"))
        number = int(number_text) if number_text.isdigit() and int(number_text) > 0 else 1
        found = search(query, category)
        shown = found[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]
        rows = "".join(
            f'<li class="result" data-id="{p.id}">{link(p.url_path, p.name)}'
            f' <span class="price">{p.price_text}</span></li>'
            for p in shown
        )
        more = ""
        if number * PAGE_SIZE < len(found):
            hidden = (
                _hidden("csrf_token", self._token())
                + _hidden("q", query)
                + _hidden("category", category)
                + _hidden("page", str(number + 1))
            )
            more = (
                f'<form class="more" method="post" action="results">{hidden}'
                '<button type="submit">More results</button></form>'
            )
        body = (
            f"<h1>{len(found)} results for {escape(query)}</h1>\n"
            f'<ol class="results">{rows}</ol>\n{more}'
        )
        return html_response(page(f"Search results, page {number} | Demo Shop", body))
