"""The HTTP fetcher's requests through a proxy: one pooled aiohttp session (decision 0002).

aiohttp speaks the proxy's side: absolute-form requests for http URLs, ``CONNECT`` tunnels
for https ones, the proxy's credentials. Imported only when a crawl session has a proxy
(``fetchers.http``). aiohttp's own exceptions never leave this module: each becomes a
``FetchError`` naming the URL.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.addresses import AddressPredicate, allowed_addresses
from crawlfleet.fetchers.connection import location_header
from crawlfleet.fetchers.decoding import body_too_large, raw_body_limit
from crawlfleet.settings import Settings


class GuardedResolver(AbstractResolver):
    """Resolves with ``inner`` and drops every address ``forbidden`` refuses.

    Raises ``ForbiddenAddress`` when no allowed address is left; lookup errors of ``inner``
    (``OSError``) pass through unchanged.
    """

    def __init__(self, inner: AbstractResolver, forbidden: AddressPredicate) -> None:
        self._inner = inner
        self._forbidden = forbidden

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed = set(allowed_addresses(host, [r["host"] for r in results], self._forbidden))
        return [r for r in results if r["host"] in allowed]

    async def close(self) -> None:
        await self._inner.close()


class ProxiedSession:
    """Requests through proxies, on one aiohttp connection pool for every proxy."""

    def __init__(self, settings: Settings, forbidden: AddressPredicate | None) -> None:
        self._settings = settings
        resolver: AbstractResolver = aiohttp.DefaultResolver()
        if forbidden is not None:
            resolver = GuardedResolver(resolver, forbidden)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=settings.concurrency, resolver=resolver),
            timeout=aiohttp.ClientTimeout(
                total=None,
                sock_connect=settings.connect_timeout_s,
                sock_read=settings.read_timeout_s,
            ),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def exchange(
        self,
        url: str,
        target: URL,
        method: str,
        body: bytes | None,
        headers: Mapping[str, str],
        *,
        proxy: str,
        proxy_headers: Mapping[str, str] | None,
        cut_at: int | None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One hop through ``proxy``: status, lower-case headers, the body as sent.

        The body is capped as ``fetchers.wire`` caps it: past ``max_body_bytes`` a
        ``TooLarge``, or, with ``cut_at``, the first bytes kept.
        """
        try:
            async with self._session.request(
                method,
                target,
                data=body,
                allow_redirects=False,
                headers=headers,
                proxy=proxy,
                proxy_headers=proxy_headers,
            ) as response:
                encoded = "Content-Encoding" in response.headers
                limit = raw_body_limit(self._settings.max_body_bytes, cut_at, encoded=encoded)
                raw = await _read_raw(response, url, limit, truncate=cut_at is not None)
                return response.status, _lower_case_headers(response, url), raw
        except aiohttp.ClientError as exc:
            raise self._describe(exc, url) from exc

    async def close(self) -> None:
        await self._session.close()

    def _describe(self, exc: aiohttp.ClientError, url: str) -> FetchError:
        settings = self._settings
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return FetchError(f"timeout connecting to {url} after {settings.connect_timeout_s}s")
        if isinstance(exc, aiohttp.SocketTimeoutError):
            return FetchError(f"timeout reading {url}: no data for {settings.read_timeout_s}s")
        if isinstance(exc, aiohttp.ClientConnectorDNSError):
            return FetchError(f"DNS lookup failed for {exc.host} ({url}): {exc.os_error}")
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return FetchError(
                f"TLS certificate of {exc.host} refused ({url}): {exc.certificate_error}",
                transient=False,
            )
        if isinstance(exc, aiohttp.ClientConnectorError):
            reason = exc.os_error.strerror or exc.os_error
            return FetchError(f"cannot connect to {exc.host}:{exc.port} ({url}): {reason}")
        if isinstance(exc, aiohttp.NonHttpUrlClientError):
            return FetchError(f"{url}: not an http(s) URL", transient=False)
        if isinstance(exc, aiohttp.InvalidURL):
            return FetchError(f"invalid URL {url}: {exc}", transient=False)
        if isinstance(exc, aiohttp.ClientResponseError):
            reason = exc.message.splitlines()[0] if exc.message else "unreadable"
            return FetchError(f"{url}: malformed response: {reason}")
        return FetchError(f"{url}: {type(exc).__name__}: {exc}")


async def _read_raw(
    response: aiohttp.ClientResponse, url: str, limit: int, *, truncate: bool
) -> bytes:
    """The body as sent, at most ``limit`` bytes: past it ``TooLarge``, or cut there."""
    declared = response.content_length
    if declared is not None and declared <= limit:
        # The parser stops at the declared length, so this read is bounded.
        return await response.content.read()
    if declared is not None and not truncate:
        raise body_too_large(url, limit, declared)
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.readany():
        size += len(chunk)
        chunks.append(chunk)
        if size > limit:
            if not truncate:
                raise body_too_large(url, limit)
            # The rest is left unread: leaving the response closes the connection.
            return b"".join(chunks)[:limit]
    return b"".join(chunks)


def _lower_case_headers(response: aiohttp.ClientResponse, url: str) -> dict[str, str]:
    """Response headers keyed in lower case; repeated headers joined with ``", "``, but
    ``Location`` read as the wire reads it (``connection.location_header``)."""
    raw = response.headers
    headers = {key.lower(): value for key, value in raw.items()}
    if len(headers) != len(raw):
        headers = {key: ", ".join(raw.getall(key)) for key in headers}
    if "location" in headers:
        del headers["location"]
        for name, value in response.raw_headers:
            if name.lower() == b"location":
                location_header(url, headers, value)
    return headers
