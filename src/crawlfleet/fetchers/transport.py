"""The HTTP fetcher's seam: one hop sent, its response read (httpx's transport).

``HttpFetcher`` keeps what a fetch means above the seam: redirects, credentials, header
profiles, the literal-address check, content codings, the archive, the crawl session's
proxy chosen. A ``Transport`` below it sends one request as it is given, directly or through
an HTTP proxy, and reads its response within the caps and the deadline. Its implementation is
``fetchers.wire.Wire`` (decisions 0038 and 0060); one is shared by a crawl's pages,
robots.txt and sitemaps (``runtime.fetcher_wiring``).

``fetch_failure`` is the one-line ``FetchError`` every fetcher (``HttpFetcher``,
``ImpersonateFetcher``) gives for what escapes its own mapping: the total deadline, a URL that
cannot be parsed, a socket's error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol
from urllib.parse import urlsplit

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.credentials import basic_auth
from crawlfleet.fetchers.target import Target


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy a hop goes through: where it listens and the ``Proxy-Authorization``
    value its credentials make (None: none). The repr never shows the credentials."""

    host: str
    port: int
    authorization: str | None = None

    def __repr__(self) -> str:
        return f"Proxy({self.host}:{self.port})"


@lru_cache(maxsize=1024)
def proxy_of(url: str, auth: tuple[str, str] | None = None) -> Proxy:
    """The ``Proxy`` of an ``http://host:port`` URL (``fetchers.protocols.Via.proxy``) and its
    Basic credentials; ``ValueError`` for any other URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or not parts.hostname:
        raise ValueError(f"not an http://host:port proxy URL: {parts.scheme}://{parts.hostname}")
    authorization = basic_auth(*auth) if auth is not None else None
    return Proxy(parts.hostname.lower(), parts.port or 80, authorization)


class Response(Protocol):
    """A response read whole (or cut where the caller asked): its status, its headers keyed in
    lower case (repeated ones joined with ``", "``, ``Location`` as
    ``fetchers.connection.location_header`` reads it) and the server's IP address (None
    through a proxy)."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> dict[str, str]: ...

    @property
    def peer(self) -> str | None: ...

    def take_body(self) -> bytes:
        """The body as sent (content codings not undone), handed over once."""
        ...


class Transport(Protocol):
    """Sends one HTTP/1.1 request and reads its response; shared by fetchers of one loop."""

    async def send(
        self,
        url: str,
        target: Target,
        method: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        proxy: Proxy | None,
        limit: int,
        cut_at: int | None,
        deadline: float,
    ) -> Response:
        """Send ``method`` to ``target`` with ``headers`` (in their order; ``Host`` and
        ``Content-Length`` are the transport's) and ``body``, through ``proxy`` when given.

        A response is returned whatever its status, a proxy's own answer to a plain-http
        request included (a 407, a 502). A body past ``limit`` bytes fails with ``TooLarge``,
        unless ``cut_at`` is given: then it is cut there. Past ``deadline`` (event loop
        time), ``TimeoutError``. Every other failure (no connection, a proxy refusing a
        tunnel, a malformed response, the read timeout) is a one-line ``FetchError`` naming
        ``url``; the address guard's refusal a ``ForbiddenAddress``.
        """
        ...

    async def close(self) -> None:
        """Close every connection; later requests open new ones."""
        ...


def fetch_failure(exc: Exception, url: str, total_timeout_s: float) -> FetchError:
    """The one-line ``FetchError`` for a failure of the total deadline, the URL or the socket."""
    if isinstance(exc, TimeoutError):
        return FetchError(f"timeout fetching {url} after {total_timeout_s}s total")
    if isinstance(exc, ValueError):
        return FetchError(f"invalid URL {url}: {exc}", transient=False)
    if isinstance(exc, OSError):
        return FetchError(f"{url}: {type(exc).__name__}: {exc}")
    return FetchError(f"{url}: unexpected {type(exc).__name__}: {exc}")
