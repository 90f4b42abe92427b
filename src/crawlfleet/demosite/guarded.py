"""The guarded role: a host that defends itself like a bot wall, per client address.

In the order it checks a request:

1. **Headers.** 403 for a User-Agent of an HTTP library (``python``, ``aiohttp``, ``curl``), a
   Chromium UA without ``sec-ch-ua`` (or whose brand version differs from the UA's), a
   Firefox or Safari UA with ``sec-ch-ua``, or a ``Mozilla/`` UA without ``Accept-Language``.
2. **Bursts.** More than ``burst`` requests from one client address within ``window_s`` bans
   it for ``ban_s``: the request that crossed the line gets 403, the next ones 429 with a
   ``Retry-After`` of the ban's remaining seconds. ``bursts`` gives some addresses their own
   (lower) limit, so a test can ban one proxy's address and not the others.
3. **Cookie challenge.** Without its ``guard_pass`` cookie a client gets a small "checking
   your browser" page: 302 back to the same URL with ``Set-Cookie``. A client with a cookie
   jar passes on the next request; one without loops.

Pages: ``/`` links to ``/page/1`` .. ``/page/<page_count>``, each one item-like page. The
access log (``accesslog.py``) records each request's client address.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

from crawlfleet.demosite.pages import html_response, link, page, robots_response

COOKIE = "guard_pass"
TOKEN = "passed-7f3a"
_LIBRARY_UA = re.compile(r"python|aiohttp|curl|wget|httpx|requests", re.IGNORECASE)
_CHROME_VERSION = re.compile(r"Chrome/(\d+)")
_BRAND_VERSION = re.compile(r'"(?:Google Chrome|Microsoft Edge|Chromium)";v="(\d+)"')


@dataclass(frozen=True, slots=True)
class GuardRules:
    """The burst limit (requests per ``window_s`` per client address) and ban length."""

    burst: int = 20
    window_s: float = 10.0
    ban_s: float = 10.0
    page_count: int = 30
    bursts: Mapping[str, int] = field(default_factory=dict)


def header_problem(headers: Mapping[str, str]) -> str | None:
    """Why a request's headers are not a browser's (None: they are coherent)."""
    agent = headers.get("User-Agent", "")
    hints = headers.get("sec-ch-ua")
    if not agent or _LIBRARY_UA.search(agent):
        return "an HTTP library's User-Agent"
    chrome = _CHROME_VERSION.search(agent)
    if chrome:
        if hints is None:
            return "a Chromium User-Agent without sec-ch-ua"
        brand = _BRAND_VERSION.search(hints)
        if brand is None or brand.group(1) != chrome.group(1):
            return "sec-ch-ua does not match the User-Agent's version"
    elif hints is not None:
        return "sec-ch-ua from a browser that does not send it"
    if agent.startswith("Mozilla/") and "Accept-Language" not in headers:
        return "a browser User-Agent without Accept-Language"
    return None


class Guarded:
    """Request handlers of the guarded host; keeps each client address's recent requests."""

    def __init__(self, rules: GuardRules | None = None) -> None:
        self.rules = rules or GuardRules()
        self._recent: dict[str, deque[float]] = {}
        self._banned_until: dict[str, float] = {}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.home),
            web.get("/robots.txt", self.robots),
            web.get("/page/{number:\\d+}", self.item),
        ]

    async def robots(self, request: web.Request) -> web.Response:
        return robots_response("User-agent: *\nDisallow:\n")

    async def home(self, request: web.Request) -> web.Response:
        refused = self._guard(request)
        if refused is not None:
            return refused
        links = "".join(
            f"<li>{link(f'/page/{n}', f'Page {n}')}</li>"
            for n in range(1, self.rules.page_count + 1)
        )
        return html_response(page("Guarded catalogue", f"<ul>{links}</ul>"))

    async def item(self, request: web.Request) -> web.Response:
        refused = self._guard(request)
        if refused is not None:
            return refused
        number = int(request.match_info["number"])
        if not 1 <= number <= self.rules.page_count:
            raise web.HTTPNotFound()
        body = f"<h1>Guarded item {number}</h1><p class='price'>{number}.00</p>"
        return html_response(page(f"Guarded item {number}", body))

    def _guard(self, request: web.Request) -> web.Response | None:
        problem = header_problem(request.headers)
        if problem is not None:
            return web.Response(status=403, text=f"Forbidden: {problem}\n")
        address = request.remote or ""
        now = time.monotonic()
        until = self._banned_until.get(address, 0.0)
        if until > now:
            return web.Response(
                status=429,
                text="Too many requests\n",
                headers={"Retry-After": str(max(1, round(until - now)))},
            )
        recent = self._recent.setdefault(address, deque())
        recent.append(now)
        while recent and recent[0] <= now - self.rules.window_s:
            recent.popleft()
        if len(recent) > self.rules.bursts.get(address, self.rules.burst):
            self._banned_until[address] = now + self.rules.ban_s
            recent.clear()
            return web.Response(status=403, text="Forbidden: your address is banned\n")
        if request.cookies.get(COOKIE) != TOKEN:
            response = web.Response(
                status=302,
                text="Checking your browser...\n",
                headers={"Location": str(request.rel_url)},
            )
            response.set_cookie(COOKIE, TOKEN, httponly=True)
            return response
        return None
