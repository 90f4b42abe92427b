"""The shop's members area: a login form with a CSRF token, pages behind it, a Basic-auth page.

- ``GET /members/login`` sets a ``csrftoken`` cookie and serves a form carrying the same
  token in a hidden ``csrfmiddlewaretoken`` field; ``POST /members/login`` with both tokens
  equal and the right ``username`` / ``password`` sets a ``sessionid`` cookie and redirects
  (303) to ``next`` (a ``/members/`` path) or ``/members/``. A token mismatch is a 403; wrong
  credentials serve the form again with an error.
- ``/members/`` lists the orders; ``/members/orders/<id>`` shows one. Without a valid
  session they redirect (302) to ``/members/login?next=<path>``. A session lasts
  ``SESSION_PAGE_VIEWS`` member pages, so a crawl must log in again on its way.
- ``/staff/`` answers 401 without HTTP Basic auth as ``STAFF_USER`` / ``STAFF_PASSWORD``.

Nothing in the public shop links here: crawls of the shop do not change.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from aiohttp import web

from crawlfleet.demosite.pages import html_response, link, page

MEMBER_USER = "alice"
MEMBER_PASSWORD = "wonderland-42"
STAFF_USER = "staff"
STAFF_PASSWORD = "backstage-7"
SESSION_PAGE_VIEWS = 4
LOGIN_PATH = "/members/login"


@dataclass(frozen=True, slots=True)
class Order:
    id: int
    date: str
    total: str
    lines: tuple[str, ...]


ORDERS: tuple[Order, ...] = tuple(
    Order(
        1000 + n,
        f"2024-03-{n:02d}",
        f"£{7 * n + 3}.{(13 * n) % 100:02d}",
        tuple(f"Book {chr(64 + (n + k) % 26 + 1)}" for k in range(1 + n % 3)),
    )
    for n in range(1, 9)
)


class Members:
    """Request handlers of the members area; sessions live in this object (one site run)."""

    def __init__(self) -> None:
        self._views_left: dict[str, int] = {}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get(LOGIN_PATH, self.login_form),
            web.post(LOGIN_PATH, self.login),
            web.get("/members/", self.index),
            web.get("/members/orders/{order:\\d+}", self.order),
            web.get("/staff/", self.staff),
        ]

    async def login_form(self, request: web.Request) -> web.Response:
        return self._form(request.query.get("next", "/members/"), error=None)

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        cookie = request.cookies.get("csrftoken", "")
        if not cookie or form.get("csrfmiddlewaretoken") != cookie:
            return html_response(page("Forbidden", "<h1>CSRF check failed</h1>"), status=403)
        target = str(form.get("next", "/members/"))
        if form.get("username") != MEMBER_USER or form.get("password") != MEMBER_PASSWORD:
            return self._form(target, error="Wrong username or password")
        session = secrets.token_hex(16)
        self._views_left[session] = SESSION_PAGE_VIEWS
        response = web.HTTPSeeOther(target if target.startswith("/members/") else "/members/")
        response.set_cookie("sessionid", session, httponly=True, path="/")
        raise response

    async def index(self, request: web.Request) -> web.Response:
        self._check_session(request)
        rows = "".join(
            f"<li>{link(f'/members/orders/{o.id}', f'Order {o.id}')}</li>" for o in ORDERS
        )
        return self._render("Your orders", f'<h1>Your orders</h1>\n<ul class="orders">{rows}</ul>')

    async def order(self, request: web.Request) -> web.Response:
        self._check_session(request)
        wanted = int(request.match_info["order"])
        found = next((o for o in ORDERS if o.id == wanted), None)
        if found is None:
            raise web.HTTPNotFound()
        lines = "".join(f"<li>{escape(line)}</li>" for line in found.lines)
        body = (
            f'<article class="order" data-order="{found.id}">\n'
            f"<h1>Order {found.id}</h1>\n"
            f'<p class="date">{found.date}</p>\n'
            f'<p class="total">{escape(found.total)}</p>\n'
            f'<ul class="lines">{lines}</ul>\n'
            "</article>"
        )
        return self._render(f"Order {found.id}", body)

    async def staff(self, request: web.Request) -> web.Response:
        expected = base64.b64encode(f"{STAFF_USER}:{STAFF_PASSWORD}".encode()).decode()
        if request.headers.get("Authorization") != f"Basic {expected}":
            raise web.HTTPUnauthorized(headers={"WWW-Authenticate": 'Basic realm="staff"'})
        return self._render("Staff", '<h1>Staff notes</h1>\n<p class="note">Restock on Friday</p>')

    def _check_session(self, request: web.Request) -> None:
        session = request.cookies.get("sessionid", "")
        left = self._views_left.get(session, 0)
        if left <= 0:
            self._views_left.pop(session, None)
            raise web.HTTPFound(f"{LOGIN_PATH}?next={quote(request.path_qs)}")
        self._views_left[session] = left - 1

    def _form(self, target: str, *, error: str | None) -> web.Response:
        token = secrets.token_hex(16)
        problem = f'<p class="error">{escape(error)}</p>\n' if error else ""
        body = (
            f"<h1>Members log in</h1>\n{problem}"
            f'<form method="post" action="{LOGIN_PATH}">'
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
            f'<input type="hidden" name="next" value="{escape(target)}">'
            '<input name="username"><input name="password" type="password">'
            '<button type="submit">Log in</button></form>'
        )
        response = self._render("Log in", body)
        response.set_cookie("csrftoken", token, path="/members/")
        return response

    def _render(self, title: str, main: str) -> web.Response:
        return html_response(page(f"{title} | Demo Shop members", f"<main>\n{main}\n</main>"))
