"""Login steps declared next to the parsers: ``@login(domain, login_url=...)``.

::

    @login("shop.example", login_url="/members/login")
    async def members(session):
        form = await session.get("/members/login")
        token = form.css_first("input[name=csrfmiddlewaretoken]").attributes["value"]
        await session.post("/members/login", form={
            "csrfmiddlewaretoken": token,
            "username": session.secret("username"),
            "password": session.secret("password"),
        })

The function is a coroutine function of a login session (``runtime.fetching.login.LoginSession``:
``get``, ``post``, ``cookies``, ``secret``); the cookies it leaves in the session are the
domain's. It runs before the domain's first page and again when a page is logged out: a 3xx
to ``login_url`` (its path), or when ``logged_out(response)`` says so (a ``Response``).
``domain`` matches the host and its subdomains, as a parser's. Like ``@parser`` it only marks
the function; ``load_logins`` finds marked functions in the crawl's parser modules.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.loader import import_source
from crawlfleet.parsing.response import Response

MARK = "__crawlfleet_login__"

LoginFunction = Callable[[Any], Awaitable[None]]
LoggedOut = Callable[[Response], bool]


@dataclass(frozen=True, slots=True)
class LoginSpec:
    """One domain's login step, as ``@login`` declared it."""

    domain: str
    login_url: str
    function: LoginFunction
    logged_out: LoggedOut | None = None
    name: str = ""

    def claims(self, host: str) -> bool:
        """Whether ``host`` is the domain or one of its subdomains."""
        return host == self.domain or host.endswith("." + self.domain)


def login(
    domain: str, *, login_url: str, logged_out: LoggedOut | None = None
) -> Callable[[LoginFunction], LoginFunction]:
    """Mark a coroutine function as the login step of ``domain``."""

    def mark(function: LoginFunction) -> LoginFunction:
        spec = LoginSpec(
            domain.strip(".").lower(), login_url, function, logged_out, function.__name__
        )
        setattr(function, MARK, spec)
        return function

    return mark


def load_logins(sources: Sequence[str]) -> list[LoginSpec]:
    """Every ``@login`` function of the parser modules ``sources``; one per domain."""
    by_domain: dict[str, LoginSpec] = {}
    for source in sources:
        for value in vars(import_source(source)).values():
            spec = getattr(value, MARK, None) if callable(value) else None
            if not isinstance(spec, LoginSpec) or by_domain.get(spec.domain) is spec:
                continue
            if spec.domain in by_domain:
                raise ConfigError(
                    f"two login steps for {spec.domain!r}: {by_domain[spec.domain].name!r} "
                    f"and {spec.name!r}"
                )
            by_domain[spec.domain] = spec
    return list(by_domain.values())
