"""The lab's refusals section: a few URLs a host refuses, and a host that starts refusing all.

``/refusals/<run>/<layout>/`` links ``REFUSALS_PAGES`` pages spread over ``SECTIONS``
(``/refusals/<run>/<layout>/<section>/<n>``) and ``len(REFUSED)`` URLs that answer a plain
403 (``/refusals/<run>/<layout>/<section>/locked-<n>``), one in each ``REFUSED_EVERY`` pages:

- ``scattered``: each refused link right after its page, through the whole crawl;
- ``clustered``: the refused links after all the pages, so they are the end of the crawl;
- ``ban``: no refused link, but the host serves ``BAN_AFTER`` pages of the run, then answers
  403 to every URL of the run (a ban that starts mid-crawl).

``<run>`` is any name: each run of ``ban`` counts its own pages (a test picks a new one).
"""

from __future__ import annotations

from collections import Counter

from aiohttp import web

from crawlfleet.demosite.pages import HTML_TYPE, simple_page

REFUSALS_PAGES = 200
REFUSED_EVERY = 20
REFUSED: tuple[int, ...] = tuple(range(1, REFUSALS_PAGES // REFUSED_EVERY + 1))
"""The numbers of the refused URLs: 10 among 200 pages (5 %)."""
SECTIONS = ("news", "docs", "shop", "blog", "help")
BAN_AFTER = 100
LAYOUTS = ("scattered", "clustered", "ban")


def section_of(number: int) -> str:
    """The section of page (or refused URL) ``number``: they take turns."""
    return SECTIONS[number % len(SECTIONS)]


def page_path(run: str, layout: str, number: int) -> str:
    return f"/refusals/{run}/{layout}/{section_of(number)}/{number}"


def refused_path(run: str, layout: str, number: int) -> str:
    return f"/refusals/{run}/{layout}/{section_of(number)}/locked-{number}"


class Refusals:
    """The ``/refusals/`` routes of the lab role."""

    def __init__(self) -> None:
        self._served: Counter[str] = Counter()  # ban runs: pages served so far

    def routes(self) -> list[web.RouteDef]:
        layout = "{layout:" + "|".join(LAYOUTS) + "}"
        return [
            web.get(f"/refusals/{{run}}/{layout}/", self.index),
            web.get(f"/refusals/{{run}}/{layout}/{{section}}/{{number:\\d+}}", self.page),
            web.get(f"/refusals/{{run}}/{layout}/{{section}}/locked-{{number:\\d+}}", self.locked),
        ]

    async def index(self, request: web.Request) -> web.Response:
        run, layout = request.match_info["run"], request.match_info["layout"]
        self._refuse_banned(run, layout)
        links: list[tuple[str, str]] = []
        for number in range(1, REFUSALS_PAGES + 1):
            links.append((page_path(run, layout, number), f"page {number}"))
            if layout == "scattered" and number % REFUSED_EVERY == 0:
                links.append((refused_path(run, layout, number // REFUSED_EVERY), "locked"))
        if layout == "clustered":
            links.extend((refused_path(run, layout, n), "locked") for n in REFUSED)
        return simple_page(f"Refusals ({layout})", links)

    async def page(self, request: web.Request) -> web.Response:
        run, layout = request.match_info["run"], request.match_info["layout"]
        number = int(request.match_info["number"])
        if request.path != page_path(run, layout, number) or number > REFUSALS_PAGES:
            raise web.HTTPNotFound()
        self._refuse_banned(run, layout)
        if layout == "ban":
            self._served[run] += 1
        return simple_page(f"Refusals page {number}", [(f"/refusals/{run}/{layout}/", "index")])

    async def locked(self, request: web.Request) -> web.Response:
        run, layout = request.match_info["run"], request.match_info["layout"]
        number = int(request.match_info["number"])
        if layout == "ban" or request.path != refused_path(run, layout, number):
            raise web.HTTPNotFound()
        if number not in REFUSED:
            raise web.HTTPNotFound()
        raise _forbidden()

    def _refuse_banned(self, run: str, layout: str) -> None:
        if layout == "ban" and self._served[run] >= BAN_AFTER:
            raise _forbidden()


def _forbidden() -> web.HTTPForbidden:
    """A plain 403: no challenge, no ban marker (what a refused URL of a real site says)."""
    return web.HTTPForbidden(text="<html><title>Forbidden</title></html>", content_type=HTML_TYPE)
