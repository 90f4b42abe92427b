"""The jsapp role: pages whose content and links only a browser sees.

- ``/`` and ``/list/<n>``: an empty ``#app`` that a script fills with ``JS_PER_LIST`` item
  links and a next-page link (``JS_LISTS`` lists, ``JS_ITEMS`` items in all);
- ``/items/<n>``: a script writes the item's name and price from data in the script;
- ``/challenge/`` and ``/challenge/q/<n>``: without the cookie ``CHALLENGE_COOKIE`` a 403
  page whose script computes the cookie and reloads; with it, the real page (a plain HTTP
  client never gets past the 403);
- ``/hang``: answers after ``HANG_S`` (a navigation timeout);
- ``/heavy``: a page with an image, a font, a video and a stylesheet (resource blocking);
  ``/heavy/img.png``, ``/heavy/font.woff2``, ``/heavy/clip.webm``, ``/heavy/style.css``;
- ``/reach?to=URL``: a page whose script fetches ``URL`` and loads it as an image and an
  iframe (the address guard); ``/redirect?to=URL``: a 302 to ``URL``;
- ``/late``: a script adds ``.late`` 300 ms after load (a selector wait rule).
"""

from __future__ import annotations

import asyncio
import json
from html import escape

from aiohttp import web

from crawlfleet.demosite.pages import html_response, page, robots_response

JS_LISTS = 3
JS_PER_LIST = 20
JS_ITEMS = JS_LISTS * JS_PER_LIST
CHALLENGE_QUOTES = 5
CHALLENGE_COOKIE = "jsapp_pass"
CHALLENGE_SEED = 1337
HANG_S = 20.0


def challenge_answer(seed: int = CHALLENGE_SEED) -> str:
    """What the challenge's script computes: a number a client must run the script to know."""
    return str(sum(i * i for i in range(seed % 97)) ^ seed)


def item_name(number: int) -> str:
    return f"JS item {number}"


def item_price(number: int) -> str:
    return f"{(number * 37) % 100 + 0.99:.2f}"


def _script_page(title: str, script: str, status: int = 200) -> web.Response:
    body = f'<div id="app"></div>\n<script>\n{script}\n</script>'
    return html_response(page(title, body), status=status)


def _fill(markup: str) -> str:
    """A script that sets ``#app``'s HTML to ``markup`` (JSON-quoted, so any text is safe)."""
    return f"document.getElementById('app').innerHTML = {json.dumps(markup)};"


class JsApp:
    """Request handlers of the jsapp role."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/list/{number:\\d+}", self.listing),
            web.get("/items/{number:\\d+}", self.item),
            web.get("/challenge/", self.challenge_home),
            web.get("/challenge/q/{number:\\d+}", self.challenge_quote),
            web.get("/hang", self.hang),
            web.get("/heavy", self.heavy),
            web.get("/heavy/{name}", self.heavy_part),
            web.get("/reach", self.reach),
            web.get("/redirect", self.redirect),
            web.get("/late", self.late),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response("User-agent: *\nDisallow:\n")

    async def home(self, request: web.Request) -> web.Response:
        return self._list_page(1)

    async def listing(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= JS_LISTS:
            raise web.HTTPNotFound()
        return self._list_page(number)

    def _list_page(self, number: int) -> web.Response:
        first = (number - 1) * JS_PER_LIST + 1
        links = "".join(
            f'<li><a class="item" href="/items/{n}">{escape(item_name(n))}</a></li>'
            for n in range(first, first + JS_PER_LIST)
        )
        markup = f'<h1>JS list {number}</h1><ul class="items">{links}</ul>'
        if number < JS_LISTS:
            markup += f'<a class="next" href="/list/{number + 1}">next</a>'
        return _script_page(f"JS list {number}", _fill(markup))

    async def item(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= JS_ITEMS:
            raise web.HTTPNotFound()
        data = json.dumps({"name": item_name(number), "price": item_price(number)})
        script = (
            f"const data = {data};\n"
            "const app = document.getElementById('app');\n"
            'app.innerHTML = \'<h1 class="name"></h1><p class="price"></p>\';\n'
            "app.querySelector('.name').textContent = data.name;\n"
            "app.querySelector('.price').textContent = data.price;"
        )
        return _script_page(item_name(number), script)

    def _passed(self, request: web.Request) -> bool:
        return request.cookies.get(CHALLENGE_COOKIE) == challenge_answer()

    def _challenge(self) -> web.Response:
        script = (
            "let n = 0;\n"
            f"for (let i = 0; i < {CHALLENGE_SEED} % 97; i++) {{ n += i * i; }}\n"
            f"document.cookie = '{CHALLENGE_COOKIE}=' + (n ^ {CHALLENGE_SEED}) + '; path=/';\n"
            "location.reload();"
        )
        return _script_page("Checking your browser", script, status=403)

    async def challenge_home(self, request: web.Request) -> web.Response:
        if not self._passed(request):
            return self._challenge()
        links = "".join(
            f'<li><a href="/challenge/q/{n}">quote {n}</a></li>'
            for n in range(1, CHALLENGE_QUOTES + 1)
        )
        return html_response(page("Guarded quotes", f"<h1>Guarded quotes</h1><ul>{links}</ul>"))

    async def challenge_quote(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= CHALLENGE_QUOTES:
            raise web.HTTPNotFound()
        if not self._passed(request):
            return self._challenge()
        body = f'<h1>Quote {number}</h1><p class="quote">Guarded words number {number}.</p>'
        return html_response(page(f"Quote {number}", body))

    async def hang(self, request: web.Request) -> web.Response:
        await asyncio.sleep(HANG_S)
        return html_response(page("Late", "<p>too late</p>"))

    async def heavy(self, request: web.Request) -> web.Response:
        head = (
            '<link rel="stylesheet" href="/heavy/style.css">\n'
            "<style>@font-face { font-family: demo; src: url(/heavy/font.woff2); }"
            " body { font-family: demo; }</style>\n"
        )
        body = (
            '<h1>Heavy</h1><img src="/heavy/img.png" alt="">'
            '<video src="/heavy/clip.webm" autoplay muted></video>'
        )
        return html_response(page("Heavy", body, head))

    async def heavy_part(self, request: web.Request) -> web.Response:
        types = {
            "img.png": "image/png",
            "font.woff2": "font/woff2",
            "clip.webm": "video/webm",
            "style.css": "text/css",
        }
        name = request.match_info["name"]
        if name not in types:
            raise web.HTTPNotFound()
        body = b"h1 { color: red; }" if name == "style.css" else b"\0" * 64
        return web.Response(body=body, content_type=types[name])

    async def reach(self, request: web.Request) -> web.Response:
        target = json.dumps(request.query.get("to", ""))
        script = (
            f"const target = {target};\n"
            "fetch(target).catch(() => {});\n"
            "const img = document.createElement('img'); img.src = target + '?img';"
            " document.body.appendChild(img);\n"
            "const frame = document.createElement('iframe'); frame.src = target + '?frame';"
            " document.body.appendChild(frame);\n" + _fill('<h1 class="reached">asked</h1>')
        )
        return _script_page("Reach", script)

    async def redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query.get("to", "/"))

    async def late(self, request: web.Request) -> web.Response:
        script = (
            "window.addEventListener('load', () => setTimeout(() => {"
            + _fill('<p class="late">arrived late</p>')
            + "}, 300));"
        )
        return _script_page("Late", script)
