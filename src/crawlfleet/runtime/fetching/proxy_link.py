"""The fetch-chain link that sends each request through a crawl session of its domain.

Which session (proxy of the domain's tier + header profile + cookie jar) a request takes, and
how tiers move and waits happen, is ``session_pool.py``'s; this link sends the request
through it and judges what came back.

What a fetch tells (all changes go to the shared ``ProxyPool`` state):

- a block signal (``runtime/step/judge.py``: 429, a challenge page), or a 403 (through a proxy, a
  refusal of the proxy's address as often as of the URL), retires the session; the
  proxy is quarantined when the block is its own: another proxy succeeded on the domain in
  the last ``ATTRIBUTION_WINDOW_S``, or ``ban_after`` blocks in a row came through it. Then the
  request is tried at once through another session (at most ``MAX_SESSION_TRIES`` in all);
- a ``FetchError`` through a proxy (refused, reset, a timeout: the proxy hangs; not a
  ``BrowserFault``, the browser's own crash) or a refused proxy login (``proxy_refused``) is
  the proxy's fault: quarantined, session retired, the
  error goes up (retried later);
- a redirect to the same URL that sets a cookie (a cookie challenge) is followed once with
  the session's jar; every ``Set-Cookie`` is kept in the jar with its scope, and a request
  sends only the cookies its URL may have (``sessions/cookies.py``, RFC 6265).

The browser goes through the same link (``own_jar=True``): it gets the session's id, proxy,
profile and jar in ``Via`` (a browser context per session) and hands the jar back after the
page (``FetchResult.cookies``: cookies set by header or by script), so HTTP and browser
fetches of a session share one jar; blocks and proxy faults are judged as above.

Proxies appear by id only: never a URL with credentials in a log line, an error or the
attempt log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace

from crawlfleet.clock import Clock
from crawlfleet.errors import BrowserFault, FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers.http import REDIRECT_STATUSES
from crawlfleet.fetchers.profiles import profile
from crawlfleet.fetchers.protocols import Via, ViaFetcher
from crawlfleet.frontier.store_types import Signal
from crawlfleet.models import CrawlRequest, FetchResult, Route
from crawlfleet.proxies.endpoints import ProxyEndpoint
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.redact import redact
from crawlfleet.runtime.fetching.session_pool import SessionOptions, SessionPool
from crawlfleet.runtime.step.judge import RETRIED_REFUSALS, judge
from crawlfleet.sessions.cookies import CookieJar
from crawlfleet.sessions.protocols import CrawlSession
from crawlfleet.urls import join

log = logging.getLogger("crawlfleet.runtime.proxy_link")  # its name before #36 (decision 0062)

ATTRIBUTION_WINDOW_S = 60.0
"""A block is a proxy's own when another proxy succeeded on the domain this recently."""
MAX_SESSION_TRIES = 3
PROXY_AUTH_REQUIRED = 407
UNAUTHORIZED = 401


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    """What another fetcher (a browser) needs to look like one crawl session of a domain.

    ``user_agent`` and ``headers`` are the session's profile; ``proxy`` is ``http://host:port``
    (None: direct) and ``proxy_auth`` its credentials (never shown by ``repr``).
    """

    route: Route
    user_agent: str
    headers: Mapping[str, str]
    proxy: str | None
    proxy_auth: tuple[str, str] | None
    cookies: Mapping[str, str]

    def __repr__(self) -> str:
        return f"SessionIdentity(route={self.route!r}, user_agent={self.user_agent!r})"


class SessionFetcher:
    """A ``Fetcher`` that sends every request through a crawl session of its domain."""

    def __init__(
        self,
        http: ViaFetcher,
        pool: ProxyPool,
        sessions: SessionPool,
        clock: Clock,
        options: SessionOptions,
        *,
        own_jar: bool = False,
    ) -> None:
        self._http = http
        self._own_jar = own_jar
        self._pool = pool
        self._sessions = sessions
        self._clock = clock
        self._options = options
        self._last_success: dict[str, dict[str, float]] = {}
        self._streaks: dict[tuple[str, str], int] = {}

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        result: FetchResult | None = None
        for _ in range(MAX_SESSION_TRIES):
            session, endpoint = await self._sessions.take(request.domain)
            result, retry = await self._through(request, session, endpoint)
            if not retry:
                return result
        assert result is not None  # MAX_SESSION_TRIES >= 1
        return result

    async def identity(self, domain: str) -> SessionIdentity:
        """The next session of ``domain`` (made or waited for like a fetch's), for a browser."""
        session, endpoint = await self._sessions.take(domain)
        chosen = profile(session.profile)
        return SessionIdentity(
            Route(session.id, endpoint.id, endpoint.tier),
            chosen.user_agent,
            chosen.as_dict(),
            endpoint.url,
            endpoint.auth,
            dict(session.cookies),
        )

    async def close(self) -> None:
        await self._http.close()

    async def _through(
        self, request: CrawlRequest, session: CrawlSession, endpoint: ProxyEndpoint
    ) -> tuple[FetchResult, bool]:
        """One fetch through ``session``; and whether to try again through another one."""
        route = Route(session.id, endpoint.id, endpoint.tier)
        try:
            result = await self._send(request, session, endpoint)
        except FetchError as exc:
            exc.route = route
            if not endpoint.is_direct and not isinstance(
                exc, TooLarge | ForbiddenAddress | BrowserFault
            ):
                await self._proxy_fault(session, endpoint, _first_line(exc))
            raise
        result.route = route
        if not endpoint.is_direct and proxy_refused(result):
            await self._proxy_fault(session, endpoint, f"proxy login refused ({result.status})")
            error = FetchError(f"{request.url}: proxy {endpoint.id} refused our credentials")
            error.route = route
            raise error
        signal, why = judge(result)
        if signal is Signal.BLOCK or result.status in RETRIED_REFUSALS:
            return result, await self._blocked(session, endpoint, why)
        self._streaks.pop((session.domain, endpoint.id), None)
        if signal is Signal.SUCCESS:
            self._last_success.setdefault(session.domain, {})[endpoint.id] = self._clock.now()
            await self._pool.success(endpoint, result.elapsed_s)
        return result, False

    async def _send(
        self, request: CrawlRequest, session: CrawlSession, endpoint: ProxyEndpoint
    ) -> FetchResult:
        """Fetch with the session's headers and jar; follow a cookie challenge once."""
        headers = profile(session.profile).as_dict()
        via = Via(endpoint.url, endpoint.auth, headers, session.id, dict(session.cookies))
        if self._own_jar:
            result = await self._http.fetch(request, via=via)
            if result.cookies is not None:
                await self._keep_jar(session, result.cookies)
            return result
        result = await self._http.fetch(self._with_jar(request, session), via=via)
        session = await self._keep_cookies(session, result)
        location = result.headers.get("location")
        if (
            result.status in REDIRECT_STATUSES
            and location
            and (join(result.final_url, location) or "").partition("#")[0] == request.url
            and "set-cookie" in result.headers
        ):
            result = await self._http.fetch(self._with_jar(request, session), via=via)
            await self._keep_cookies(session, result)
        return result

    async def _keep_cookies(self, session: CrawlSession, result: FetchResult) -> CrawlSession:
        set_cookie = result.headers.get("set-cookie")
        if set_cookie is None:
            return session
        jar = CookieJar.from_stored(session.cookies, session.domain)
        if not jar.receive(result.final_url, set_cookie, self._clock.now()):
            return session
        return await self._keep_jar(session, jar.stored())

    def _with_jar(self, request: CrawlRequest, session: CrawlSession) -> CrawlRequest:
        """``request`` sending the session's cookies for its URL before any of its own."""
        jar = CookieJar.from_stored(session.cookies, session.domain)
        cookie = jar.header(request.url, self._clock.now())
        if cookie is None:
            return request
        own = {k: v for k, v in request.headers.items() if k.lower() != "cookie"}
        theirs = [v for k, v in request.headers.items() if k.lower() == "cookie"]
        return replace(request, headers={**own, "Cookie": "; ".join([cookie, *theirs])})

    async def _keep_jar(self, session: CrawlSession, jar: Mapping[str, str]) -> CrawlSession:
        if dict(jar) == dict(session.cookies):
            return session
        kept = replace(session, cookies=dict(jar))
        await self._sessions.keep(kept)
        return kept

    async def _blocked(self, session: CrawlSession, endpoint: ProxyEndpoint, why: str) -> bool:
        """Count a block through ``endpoint``; True when it was quarantined for it."""
        domain = session.domain
        key = (domain, endpoint.id)
        self._streaks[key] = streak = self._streaks.get(key, 0) + 1
        now = self._clock.now()
        others = any(
            proxy != endpoint.id and now - at <= ATTRIBUTION_WINDOW_S
            for proxy, at in self._last_success.get(domain, {}).items()
        )
        own = others or streak >= self._options.ban_after
        state, began = await self._pool.penalize(endpoint, error=False, quarantine=own)
        await self._sessions.retire(session)
        own = own or state.quarantined(now)  # quarantined by another process already
        if own:
            self._streaks.pop(key, None)
            if began:
                log.warning(
                    "%s: proxy %s quarantined for %.0f s (%s, %d bans)",
                    domain, endpoint.id, state.quarantined_until - now, why, state.bans,
                )  # fmt: skip
        return own

    async def _proxy_fault(self, session: CrawlSession, endpoint: ProxyEndpoint, why: str) -> None:
        state, began = await self._pool.penalize(endpoint, error=True, quarantine=True)
        await self._sessions.retire(session)
        if began:
            log.warning(
                "proxy %s quarantined for %.0f s: %s",
                endpoint.id, state.quarantined_until - self._clock.now(), why,
            )  # fmt: skip


def proxy_refused(result: FetchResult) -> bool:
    """Whether the proxy itself refused our login: a 407, or a 401 whose realm names a proxy
    (tinyproxy 1.11 answers a plain-http request with bad credentials so)."""
    if result.status == PROXY_AUTH_REQUIRED:
        return True
    challenge = result.headers.get("www-authenticate", "").lower()
    return result.status == UNAUTHORIZED and "realm=" in challenge and "proxy" in challenge


def _first_line(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return redact(text)
