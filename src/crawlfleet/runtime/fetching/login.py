"""Logging in: the session a login step drives, and the fetcher link that keeps domains logged in.

``LoginFetcher`` sits in the fetch chain (``runtime.fetching.chain``) above the HTTP fetcher.
For a request whose host a ``@login`` step claims, it sends the domain's cookies (from the
``SessionStore``, shared by every process of the crawl); before the domain's first request it
logs in when the store has no session yet. A response the step's rule calls logged out makes
it log in again (unless another process already did: the store's version changed) and fetch
the page once more; still logged out then is a ``LoginFailed``. Logins of one domain run one
at a time per process. A failed login is remembered for ``LOGIN_RETRY_S``: the domain's pages
fail at once meanwhile instead of each trying again.

Secrets reach the step through ``LoginSession.secret``; they and the cookies are never logged,
and every error passes ``SiteSecrets.scrub``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import orjson

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, LoginFailed
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.models import CrawlRequest, FetchResult
from crawlfleet.parsing.login import LoginSpec
from crawlfleet.parsing.response import Response
from crawlfleet.secretsfile import SiteSecrets
from crawlfleet.sessions.cookies import CookieJar
from crawlfleet.sessions.protocols import SessionStore, StoredSession
from crawlfleet.urls import request_fingerprint

log = logging.getLogger("crawlfleet.runtime.login")  # its name before #36 (decision 0062)

LOGIN_RETRY_S = 60.0
"""How long a failed login makes its domain's pages fail without trying again."""
MAX_LOGIN_REDIRECTS = 10
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class LoginSession:
    """What a login step drives: requests to its domain with a cookie jar, and its secrets.

    ``get`` and ``post`` follow redirects (a 301/302/303 continues as a GET) and keep every
    cookie set on the way in ``jar``, each sent only where its scope allows (another host
    of a redirect gets none of this host's); they return the final page as a ``Response``.
    Relative URLs are resolved against ``base_url`` (the first page of the domain the crawl
    asked for).
    """

    def __init__(
        self, fetcher: Fetcher, spec: LoginSpec, base_url: str, secrets: SiteSecrets
    ) -> None:
        self._fetcher = fetcher
        self._spec = spec
        self._secrets = secrets
        self.base_url = base_url
        self.jar = CookieJar()

    def secret(self, name: str) -> str:
        """The domain's secret ``name`` (secrets file or environment); ``LoginFailed`` if none."""
        value = self._secrets.get(self._spec.domain, name)
        if value is None:
            raise LoginFailed(f"login for {self._spec.domain}: no secret {name!r} given")
        return value

    async def get(self, url: str, *, headers: Mapping[str, str] | None = None) -> Response:
        return await self._send("GET", url, "", dict(headers or {}))

    async def post(
        self,
        url: str,
        *,
        form: Mapping[str, Any] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """POST ``form`` (URL-encoded) or ``json``; give at most one."""
        sent = dict(headers or {})
        if form is not None and json is not None:
            raise ValueError("give a form or a JSON body, not both")
        body = ""
        if form is not None:
            body = urlencode(list(form.items()), doseq=True)
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        elif json is not None:
            body = orjson.dumps(json).decode()
            sent.setdefault("Content-Type", "application/json")
        return await self._send("POST", url, body, sent)

    async def _send(self, method: str, url: str, body: str, headers: dict[str, str]) -> Response:
        target = urljoin(self.base_url, url)
        for _ in range(MAX_LOGIN_REDIRECTS + 1):
            sent = dict(headers)
            cookie = self.jar.header(target, time.time())
            if cookie is not None:
                sent["Cookie"] = cookie
            request = CrawlRequest(
                url=target,
                fingerprint=request_fingerprint(target, method, body),
                domain=self._spec.domain,
                method=method,
                body=body,
                headers=sent,
            )
            result = await self._fetcher.fetch(request)
            self.jar.receive(result.final_url, result.headers.get("set-cookie"), time.time())
            location = result.headers.get("location")
            if result.status not in _REDIRECTS or not location:
                return Response(result)
            target = urljoin(target, location)
            if result.status in (301, 302, 303) and method != "GET":
                method, body = "GET", ""
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
        raise LoginFailed(
            f"login for {self._spec.domain}: more than {MAX_LOGIN_REDIRECTS} redirects"
        )


class LoginFetcher:
    """Keeps the domains of ``logins`` logged in around ``inner`` (redirects not followed)."""

    def __init__(
        self,
        inner: Fetcher,
        logins: Sequence[LoginSpec],
        store: SessionStore,
        secrets: SiteSecrets,
        clock: Clock,
    ) -> None:
        self._inner = inner
        self._logins = tuple(logins)
        self._store = store
        self._secrets = secrets
        self._clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._sessions: dict[str, StoredSession] = {}
        self._failed: dict[str, tuple[float, str]] = {}

    async def fetch(self, request: CrawlRequest) -> FetchResult:
        spec = self._spec_for(request.url)
        if spec is None or self._is_login_page(spec, request.url):
            return await self._inner.fetch(request)
        session = await self._session(spec, request.url, stale=None)
        result = await self._inner.fetch(with_cookies(request, session, spec.domain))
        if not self._logged_out(spec, result):
            return result
        log.info("%s: logged out at %s; logging in again", spec.domain, request.url)
        session = await self._session(spec, request.url, stale=session.version)
        result = await self._inner.fetch(with_cookies(request, session, spec.domain))
        if self._logged_out(spec, result):
            raise LoginFailed(f"{request.url}: still logged out after logging in to {spec.domain}")
        return result

    async def close(self) -> None:
        await self._inner.close()

    def _spec_for(self, url: str) -> LoginSpec | None:
        host = (urlsplit(url).hostname or "").lower()
        return next((spec for spec in self._logins if spec.claims(host)), None)

    def _is_login_page(self, spec: LoginSpec, url: str) -> bool:
        return urlsplit(url).path == urlsplit(spec.login_url).path

    def _logged_out(self, spec: LoginSpec, result: FetchResult) -> bool:
        location = result.headers.get("location")
        if (
            result.status in _REDIRECTS
            and location
            and self._is_login_page(spec, urljoin(result.final_url, location))
        ):
            return True
        return spec.logged_out is not None and spec.logged_out(Response(result))

    async def _session(self, spec: LoginSpec, url: str, *, stale: str | None) -> StoredSession:
        """The domain's session; a new login when there is none, or only ``stale`` one."""
        known = self._sessions.get(spec.domain)
        if known is not None and known.version != stale:
            return known
        async with self._locks.setdefault(spec.domain, asyncio.Lock()):
            stored = await self._store.load(spec.domain)
            if stored is None or stored.version == stale:
                stored = await self._login(spec, url)
            self._sessions[spec.domain] = stored
            return stored

    async def _login(self, spec: LoginSpec, url: str) -> StoredSession:
        failed = self._failed.get(spec.domain)
        if failed is not None and self._clock.now() < failed[0]:
            raise LoginFailed(failed[1])
        session = LoginSession(self._inner, spec, url, self._secrets)
        try:
            await spec.function(session)
            if not len(session.jar):
                raise LoginFailed(f"login for {spec.domain}: {spec.name} set no cookie")
        except Exception as exc:
            why = str(exc) if isinstance(exc, LoginFailed) else f"{type(exc).__name__}: {exc}"
            message = self._secrets.scrub(f"login step {spec.name!r} failed: {why}")
            self._failed[spec.domain] = (self._clock.now() + LOGIN_RETRY_S, message)
            log.warning("%s", message)
            raise LoginFailed(message) from None
        self._failed.pop(spec.domain, None)
        log.info("%s: logged in (%d cookies)", spec.domain, len(session.jar))
        return await self._store.save(spec.domain, session.jar.stored())


def with_cookies(request: CrawlRequest, session: StoredSession, owner: str) -> CrawlRequest:
    """``request`` sending those of the session's cookies its URL may have (over a Cookie
    header of its own); ``owner``: the login domain."""
    jar = CookieJar.from_stored(session.cookies, owner)
    cookie = jar.header(request.url, time.time())
    if cookie is None:
        return request
    return replace(request, headers={**request.headers, "Cookie": cookie})


def check_logins(logins: Sequence[LoginSpec], secrets: SiteSecrets) -> None:
    """``ConfigError`` for a login domain without any secret (file or environment)."""
    for spec in logins:
        if not secrets.has(spec.domain):
            raise ConfigError(
                f"login step {spec.name!r} needs secrets for {spec.domain!r}: a "
                f'["{spec.domain}"] table in --secrets FILE, or CRAWLFLEET_SECRET_* variables'
            )
