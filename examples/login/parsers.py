"""The members area of the demo shop: log in through a form with a CSRF token, read the orders.

The login step runs before the first members page and again whenever a page redirects to
the login form (the demo's sessions last a few pages). The credentials come from the
secrets file (``--secrets examples/login/secrets.toml``) or the environment
(``CRAWLFLEET_SECRET_127_0_0_2_PASSWORD``), never from the crawl config. ``/staff/`` needs
HTTP Basic auth: ``basic_username`` / ``basic_password`` of the same secrets.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.errors import LoginFailed
from crawlfleet.parsing.login import login
from crawlfleet.parsing.plugins import Follow, parser
from crawlfleet.parsing.response import Response
from crawlfleet.runtime.fetching.login import LoginSession


@login("127.0.0.2", login_url="/members/login")
async def members_login(session: LoginSession) -> None:
    form = await session.get("/members/login")
    token = form.css_first("input[name=csrfmiddlewaretoken]")
    if token is None:
        raise LoginFailed("no CSRF token on the login form")
    page = await session.post(
        "/members/login",
        form={
            "csrfmiddlewaretoken": token.attributes.get("value") or "",
            "username": session.secret("username"),
            "password": session.secret("password"),
        },
    )
    if page.css_first("p.error") is not None:
        raise LoginFailed("the site refused the credentials")


@parser(domain="127.0.0.2", pattern="/members/", follow=[Follow(r"/members/orders/\d+$")])
def order_list(response: Response) -> None:
    """Only the links to the orders (the follow rule)."""


@parser(domain="127.0.0.2", pattern="/members/orders/*", item_type="order")
def order(response: Response) -> Iterator[dict[str, Any]]:
    article = response.css_first("article.order")
    if article is None:
        return
    yield {
        "key": article.attributes.get("data-order"),
        "date": article.css_first("p.date").text(),  # type: ignore[union-attr]
        "total": article.css_first("p.total").text(),  # type: ignore[union-attr]
        "lines": [line.text() for line in article.css("ul.lines li")],
    }


@parser(domain="127.0.0.2", pattern="/staff/", item_type="staff_note")
def staff(response: Response) -> Iterator[dict[str, Any]]:
    for note in response.css("p.note"):
        yield {"key": "staff", "text": note.text()}
