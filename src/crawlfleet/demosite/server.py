"""The demo site: one aiohttp app per role, each on its own loopback address, all on one port."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path

from aiohttp import web

from crawlfleet.demosite.accesslog import AccessLog, AccessRecord
from crawlfleet.demosite.catalog import Catalog, Redesign
from crawlfleet.demosite.catalogue import CatalogueEdits, conditional, edit_routes
from crawlfleet.demosite.docindex import DocIndex
from crawlfleet.demosite.guarded import Guarded, GuardRules
from crawlfleet.demosite.hazards import FlakyCounters, Hazards
from crawlfleet.demosite.jsapp import JsApp
from crawlfleet.demosite.lab import Lab
from crawlfleet.demosite.members import Members
from crawlfleet.demosite.mixed import Mixed
from crawlfleet.demosite.picky import Picky
from crawlfleet.demosite.quotes import Quotes
from crawlfleet.demosite.refusals import Refusals
from crawlfleet.demosite.robots_sites import RobotsSite
from crawlfleet.demosite.roles import (
    CATALOG,
    DEFAULT_ADDRESSES,
    GUARDED,
    JSAPP,
    LAB,
    MIXED,
    QUOTES,
    REDESIGN,
    ROBOTS_5XX,
    ROBOTS_404,
    ROLES,
    SHOP,
    SLOW_ROBOTS,
)
from crawlfleet.demosite.shop import Shop
from crawlfleet.demosite.shop_aisles import ShopAisles
from crawlfleet.demosite.shop_api import ShopApi
from crawlfleet.demosite.shop_search import ShopSearch

_BIND_ATTEMPTS = 50
_SHUTDOWN_TIMEOUT_S = 0.5


class DemoSite:
    """Serves every role in ``addresses`` (role -> loopback address) on one port.

    ``port`` 0 picks a port that is free on all the addresses. ``access_log_path``, when set,
    receives every access record as a JSON line too. ``crawl_delay_s`` is the Crawl-delay of
    the slow-robots role; ``guard`` the rules of the guarded role (``guarded.py``). ``edits``
    change the shop's catalogue while it runs; ``redesign`` is the ``redesign`` role's switch
    (``catalog.py``; set ``redesign.set(n)`` to change its templates after ``n`` item pages).
    """

    def __init__(
        self,
        port: int = 0,
        addresses: Mapping[str, str] | None = None,
        access_log_path: Path | None = None,
        crawl_delay_s: float = 2.0,
        guard: GuardRules | None = None,
    ) -> None:
        self._addresses = dict(DEFAULT_ADDRESSES if addresses is None else addresses)
        unknown = set(self._addresses) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown demo site roles {sorted(unknown)}; known: {ROLES}")
        self._requested_port = port
        self._port: int | None = None
        self._access_log = AccessLog(access_log_path)
        self._flaky = FlakyCounters()
        self._crawl_delay_s = crawl_delay_s
        self._guard = guard
        self.edits = CatalogueEdits()
        self.redesign = Redesign()
        self._runners: list[web.AppRunner] = []

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the demo site is not started")
        return self._port

    @property
    def addresses(self) -> dict[str, str]:
        return dict(self._addresses)

    async def start(self) -> None:
        if self._runners:
            raise RuntimeError("the demo site is already started")
        self._port, sockets = bind_all(list(self._addresses.values()), self._requested_port)
        try:
            for role, address in self._addresses.items():
                runner = web.AppRunner(
                    self._build_app(role),
                    handler_cancellation=True,
                    shutdown_timeout=_SHUTDOWN_TIMEOUT_S,
                    access_log=None,
                )
                await runner.setup()
                self._runners.append(runner)
                site = web.SockSite(runner, sockets.pop(address))
                await site.start()
        except BaseException:
            for sock in sockets.values():
                sock.close()
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close every listener; requests still in flight are cancelled after 0.5 s."""
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()
        self._port = None

    def url(self, role: str, path: str = "/") -> str:
        """``url("shop", "/catalogue/page-1.html")`` -> ``http://127.0.0.2:PORT/catalogue/...``."""
        if role not in self._addresses:
            raise KeyError(f"the demo site does not serve role {role!r}")
        return f"http://{self._addresses[role]}:{self.port}{path}"

    @property
    def log(self) -> list[AccessRecord]:
        """A snapshot of the access log, in arrival order."""
        return self._access_log.snapshot()

    def clear_log(self) -> None:
        self._access_log.clear()

    def reset_flaky(self) -> None:
        """Make every ``/flaky/<name>`` fail again from its first request."""
        self._flaky.reset()

    def _build_app(self, role: str) -> web.Application:
        middlewares = [self._access_log.middleware(role)]
        if role == SHOP:
            middlewares.append(conditional())
        app = web.Application(middlewares=middlewares)
        app.on_response_prepare.append(self._access_log.on_response_prepare)
        if role == SHOP:
            app.add_routes(Shop(self.url, self.edits).routes())
            app.add_routes(edit_routes(self.edits))
            app.add_routes(ShopApi().routes())
            app.add_routes(ShopSearch().routes())
            app.add_routes(ShopAisles().routes())
            app.add_routes(Members().routes())
        elif role == QUOTES:
            app.add_routes(Quotes().routes())
        elif role == LAB:
            app.add_routes(Lab(self.url).routes())
            app.add_routes(Hazards(self._flaky).routes())
            app.add_routes(Picky().routes())
            app.add_routes(DocIndex().routes())
            app.add_routes(Refusals().routes())
        elif role == GUARDED:
            app.add_routes(Guarded(self._guard).routes())
        elif role == JSAPP:
            app.add_routes(JsApp().routes())
        elif role == MIXED:
            app.add_routes(Mixed().routes())
        elif role == CATALOG:
            app.add_routes(Catalog().routes())
        elif role == REDESIGN:
            app.add_routes(Catalog(self.redesign).routes())
        elif role == ROBOTS_5XX:
            app.add_routes(RobotsSite(robots_status=503).routes())
        elif role == ROBOTS_404:
            app.add_routes(RobotsSite(robots_status=404).routes())
        elif role == SLOW_ROBOTS:
            app.add_routes(
                RobotsSite(robots_status=200, crawl_delay_s=self._crawl_delay_s).routes()
            )
        return app


def bind_all(addresses: list[str], port: int) -> tuple[int, dict[str, socket.socket]]:
    """Listening-ready TCP sockets on every address at one port (0: any port free on all)."""
    last_error: OSError | None = None
    for _ in range(_BIND_ATTEMPTS if port == 0 else 1):
        sockets: dict[str, socket.socket] = {}
        chosen = port
        try:
            for address in addresses:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sockets[address] = sock
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, chosen))
                chosen = sock.getsockname()[1]
            return chosen, sockets
        except OSError as error:
            last_error = error
            for sock in sockets.values():
                sock.close()
    raise OSError(f"cannot bind {addresses} on port {port}: {last_error}") from last_error
