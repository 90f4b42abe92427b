"""Three small sites that differ only in their robots.txt: 503, 404, and a Crawl-delay."""

from __future__ import annotations

from aiohttp import web

from crawlfleet.demosite.pages import robots_response, simple_page

PAGE_COUNT = 3
PAGE_PATHS: tuple[str, ...] = ("/", *(f"/page/{n}" for n in range(1, PAGE_COUNT + 1)))


class RobotsSite:
    """``/`` linking to ``/page/1`` .. ``/page/3``, each linking to the next, plus robots.txt.

    ``robots_status`` is the status of ``/robots.txt``; with 200 its body sets
    ``crawl_delay_s`` when given.
    """

    def __init__(self, robots_status: int, crawl_delay_s: float | None = None) -> None:
        self._robots_status = robots_status
        self._crawl_delay_s = crawl_delay_s

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/page/{number:\\d+}", self.numbered_page),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        if self._robots_status != 200:
            return web.Response(status=self._robots_status, text=f"status {self._robots_status}")
        delay = f"Crawl-delay: {self._crawl_delay_s:g}\n" if self._crawl_delay_s else ""
        return robots_response(f"User-agent: *\n{delay}Disallow:\n")

    async def home(self, request: web.Request) -> web.Response:
        return simple_page("Home", [("/page/1", "first page")])

    async def numbered_page(self, request: web.Request) -> web.Response:
        number = int(request.match_info["number"])
        if not 1 <= number <= PAGE_COUNT:
            raise web.HTTPNotFound()
        links = [("/", "home")]
        if number < PAGE_COUNT:
            links.append((f"/page/{number + 1}", "next"))
        return simple_page(f"Page {number}", links)
