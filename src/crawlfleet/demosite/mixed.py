"""The mixed role: one host, some URL patterns that need JavaScript and some that do not.

``/`` links the first ten of ``/static/<n>`` (``MIXED_STATIC`` server-rendered products) and
of ``/app/<n>`` (``MIXED_APP`` products whose name and price a script writes); every product
page links its neighbours in both patterns, in plain HTML. The adaptive fetcher (``fetcher = "auto"``)
should learn that ``/static/*`` reads the same over HTTP and ``/app/*`` does not.
"""

from __future__ import annotations

import json
from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, page, robots_response

MIXED_STATIC = 60
MIXED_APP = 30


def product_name(kind: str, number: int) -> str:
    return f"{kind} product {number}"


def _nav(number: int) -> str:
    links = [f'<a href="/static/{n}">static {n}</a>' for n in _near(number, MIXED_STATIC)]
    links += [f'<a href="/app/{n}">app {n}</a>' for n in _near(number, MIXED_APP)]
    return "<nav>" + " ".join(links) + "</nav>"


def _near(number: int, count: int) -> list[int]:
    return sorted({(number + step - 1) % count + 1 for step in (1, 7, 13)})


class Mixed:
    """Request handlers of the mixed role."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/static/{number:\\d+}", self.static),
            web.get("/app/{number:\\d+}", self.app),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response("User-agent: *\nDisallow:\n")

    async def home(self, request: web.Request) -> web.Response:
        links = [f'<li><a href="/static/{n}">static {n}</a></li>' for n in range(1, 11)]
        links += [f'<li><a href="/app/{n}">app {n}</a></li>' for n in range(1, 11)]
        return html_response(page("Mixed shop", f"<h1>Mixed shop</h1><ul>{''.join(links)}</ul>"))

    async def static(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= MIXED_STATIC:
            raise web.HTTPNotFound()
        name = product_name("static", number)
        body = f'<h1 class="name">{escape(name)}</h1><p class="price">{number}.50</p>'
        return html_response(page(name, body + _nav(number)))

    async def app(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= MIXED_APP:
            raise web.HTTPNotFound()
        data = json.dumps({"name": product_name("app", number), "price": f"{number}.75"})
        script = (
            f"const data = {data};\n"
            "const app = document.getElementById('app');\n"
            'app.innerHTML = \'<h1 class="name"></h1><p class="price"></p>\';\n'
            "app.querySelector('.name').textContent = data.name;\n"
            "app.querySelector('.price').textContent = data.price;"
        )
        body = f'<div id="app"></div>\n<script>\n{script}\n</script>\n{_nav(number)}'
        return html_response(page(product_name("app", number), body))
