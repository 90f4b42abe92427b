"""The lab's picky section: pages served only to clients that send a browser's client hints.

``/picky/`` links ``/picky/page/1..PICKY_PAGES``. A request without a ``sec-ch-ua`` header
(what Chromium-based browsers send, and the ``impersonate`` fetcher with them; the plain HTTP
fetcher does not) gets a 403 "Access denied" page, as sites behind a bot filter answer. The
strategy ladder's test and demo: the domain climbs to the ``impersonate`` rung and the crawl
completes.
"""

from __future__ import annotations

from aiohttp import web

from crawlfleet.demosite.pages import HTML_TYPE, simple_page

PICKY_PAGES = 30
BROWSER_HINT = "sec-ch-ua"


class Picky:
    """The ``/picky/`` routes of the lab role."""

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/picky/", self.index),
            web.get("/picky/page/{number:\\d+}", self.page),
        ]

    async def index(self, request: web.Request) -> web.Response:
        _refuse_bots(request)
        links = [(f"/picky/page/{n}", f"page {n}") for n in range(1, PICKY_PAGES + 1)]
        return simple_page("Picky", links)

    async def page(self, request: web.Request) -> web.Response:
        _refuse_bots(request)
        number = int(request.match_info["number"])
        if not 1 <= number <= PICKY_PAGES:
            raise web.HTTPNotFound()
        return simple_page(f"Picky page {number}", [("/picky/", "index")])


def _refuse_bots(request: web.Request) -> None:
    if BROWSER_HINT not in request.headers:
        raise web.HTTPForbidden(
            text="<html><title>Access denied</title><body>Access denied</body></html>",
            content_type=HTML_TYPE,
        )
