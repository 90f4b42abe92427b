"""What a browser context looks like for one crawl session: its proxy, User-Agent, jar.

With ``[crawl.proxies]`` every browser fetch comes through a crawl session
(``runtime/fetching/proxy_link.py``): the pool gives each session its own context
(``BrowserPool.page(identity)``) opened with the session's proxy (Playwright's per-context
``proxy``, credentials included: Debian's Chromium honours it on Linux, decision 0012), the
User-Agent of its header profile and the profile's ``Accept-Language`` and client hints. The
session's cookie jar is put into the context before each page and read back after it, each
cookie with its scope (domain or host-only, path, secure, expiry: ``sessions/cookies.py``),
so Chromium sends it where the HTTP fetcher would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import BrowserContext

from crawlfleet.fetchers.protocols import Via
from crawlfleet.sessions.cookies import Cookie, CookieJar, domain_matches

CONTEXT_HEADERS = ("accept-language", "sec-ch-ua", "sec-ch-ua-mobile", "sec-ch-ua-platform")
"""Profile headers a context sends with every request (the others are per request type)."""


@dataclass(frozen=True, slots=True)
class BrowserIdentity:
    """One crawl session as a browser context: ``id`` keys its context in the pool."""

    id: str
    user_agent: str
    headers: Mapping[str, str]
    proxy: str | None
    proxy_auth: tuple[str, str] | None
    cookies: Mapping[str, str]

    def __repr__(self) -> str:
        return f"BrowserIdentity(id={self.id!r}, proxy={self.proxy!r})"

    @classmethod
    def from_via(cls, via: Via) -> BrowserIdentity | None:
        """The identity a session's ``via`` describes; None for a via without a session."""
        if via.session is None:
            return None
        headers = {name.lower(): value for name, value in via.headers.items()}
        return cls(
            via.session,
            headers.get("user-agent", ""),
            {name: value for name, value in headers.items() if name in CONTEXT_HEADERS},
            via.proxy,
            via.proxy_auth,
            dict(via.cookies),
        )

    def context_options(self) -> dict[str, Any]:
        """Keyword arguments of ``Browser.new_context`` for this session."""
        options: dict[str, Any] = {"extra_http_headers": dict(self.headers)}
        if self.user_agent:
            options["user_agent"] = self.user_agent
        if self.proxy is not None:
            proxy = {"server": self.proxy}
            if self.proxy_auth is not None:
                proxy["username"], proxy["password"] = self.proxy_auth
            options["proxy"] = proxy
        return options


async def load_jar(context: BrowserContext, url: str, cookies: Mapping[str, str]) -> None:
    """Put the session's stored ``cookies`` into ``context`` with their scopes (bare names
    of an old jar: on ``url``'s host, every path)."""
    if not cookies:
        return
    host = (urlsplit(url).hostname or "").lower()
    jar = CookieJar.from_stored(cookies, host)
    await context.add_cookies([_playwright_cookie(cookie) for cookie in jar])  # type: ignore[misc]


def _playwright_cookie(cookie: Cookie) -> dict[str, Any]:
    # Playwright's host-only cookie: a domain without a leading dot; a domain cookie: with one.
    domain = cookie.domain if cookie.host_only else f".{cookie.domain}"
    entry: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value,
        "domain": domain,
        "path": cookie.path,
        "secure": cookie.secure,
    }
    if cookie.expires_at is not None:
        entry["expires"] = cookie.expires_at
    return entry


async def read_jar(context: BrowserContext, url: str) -> dict[str, str]:
    """The stored form of the cookies of ``context`` under ``url``'s host's domains."""
    host = (urlsplit(url).hostname or "").lower()
    kept = []
    for cookie in await context.cookies():
        raw_domain = cookie.get("domain", "").lower()
        domain = raw_domain.lstrip(".")
        if not (domain_matches(host, domain) or domain_matches(domain, host)):
            continue
        expires = cookie.get("expires", -1)
        kept.append(
            Cookie(
                name=cookie.get("name", ""),
                value=cookie.get("value", ""),
                domain=domain,
                path=cookie.get("path", "/") or "/",
                host_only=not raw_domain.startswith("."),
                secure=bool(cookie.get("secure", False)),
                expires_at=None if expires is None or expires < 0 else float(expires),
            )
        )
    return CookieJar(kept).stored()
