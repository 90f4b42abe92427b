"""HTTP/1.1 exchanges on pooled keep-alive connections (``fetchers.connection``).

The HTTP fetcher's direct requests go through here; requests through a proxy go through
aiohttp (``fetchers.proxied``). Why: docs/decisions/0038-http-exchanges-on-httptools.md.

A connection goes back to its origin's idle pool only when its response was read whole and
both sides keep it alive; any other end (an error, a cut body, a cancelled fetch) aborts
it. Idle connections are closed after ``KEEPALIVE_S``. Every address a connection goes to
passes ``forbidden`` first (the resolver's answer, not a name), when a predicate is given.

Every failure is a ``FetchError`` (or subclass) naming the URL, in one line, but the fetch's
deadline, a ``TimeoutError`` (the fetcher names it).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.addresses import AddressPredicate, allowed_addresses
from crawlfleet.fetchers.connection import Connection, Exchange

KEEPALIVE_S = 15.0
Origin = tuple[str, str, int]


class Wire:
    """Pools of keep-alive connections by origin, with their connect and read timeouts."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        read_timeout_s: float,
        forbidden: AddressPredicate | None,
        max_idle_per_origin: int,
    ) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._forbidden = forbidden
        self._max_idle = max_idle_per_origin
        self._idle: dict[Origin, list[Connection]] = {}
        self._open: set[Connection] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._tls: ssl.SSLContext | None = None

    async def request(
        self,
        url: str,
        origin: Origin,
        head: bytes,
        *,
        limit: int,
        cut_at: int | None,
        head_only: bool,
        idempotent: bool,
        deadline: float,
    ) -> Exchange:
        """Send ``head`` (request line, headers and body) to ``origin``; the response read.

        A body past ``limit`` bytes fails with ``TooLarge``, unless ``cut_at`` is given: then
        the first ``limit`` bytes are kept (at most ``cut_at`` of a body sent as it is).

        A reused connection that the server closed before answering is retried once on a
        new one, for an ``idempotent`` request. Past ``deadline`` (event loop time), connecting
        or reading, ``TimeoutError``.
        """
        loop = asyncio.get_running_loop()
        connection = self._idle_connection(origin)
        reused = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(url, origin, deadline)
            exchange = Exchange(url, limit, cut_at, head_only, deadline, loop)
            try:
                await connection.send(exchange, head)
            except BaseException:
                self._drop(connection)
                if reused and idempotent and exchange.unanswered:
                    reused, connection = False, None
                    continue
                raise
            self._release(origin, connection)
            return exchange

    async def close(self) -> None:
        """Abort every connection; later requests open new ones."""
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()

    def _idle_connection(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)
        return None

    def _drop(self, connection: Connection) -> None:
        connection.abort()
        self._open.discard(connection)

    def _release(self, origin: Origin, connection: Connection) -> None:
        if not connection.reusable():
            self._drop(connection)
            return
        idle = self._idle.setdefault(origin, [])
        if len(idle) >= self._max_idle:
            self._drop(connection)
            return
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        idle.append(connection)
        if self._sweep is None:
            self._sweep = loop.call_later(KEEPALIVE_S, self._close_idle)

    def _close_idle(self) -> None:
        """Close the connections idle for ``KEEPALIVE_S``; come back while some are left."""
        loop = asyncio.get_running_loop()
        stale = loop.time() - KEEPALIVE_S
        for origin, idle in list(self._idle.items()):
            kept = [c for c in idle if c.idle_since > stale and not c.closed]
            for connection in idle:
                if connection not in kept:
                    self._drop(connection)
            if kept:
                self._idle[origin] = kept
            else:
                del self._idle[origin]
        self._sweep = loop.call_later(KEEPALIVE_S, self._close_idle) if self._idle else None

    async def _connect(self, url: str, origin: Origin, deadline: float) -> Connection:
        _, host, port = origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(min(loop.time() + self._connect_timeout_s, deadline)):
                addresses = await self._addresses(url, host, port)
                return await self._connect_first(url, origin, addresses)
        except TimeoutError:
            if loop.time() >= deadline:
                raise
            raise FetchError(
                f"timeout connecting to {url} after {self._connect_timeout_s}s"
            ) from None

    async def _addresses(self, url: str, host: str, port: int) -> list[str]:
        """The addresses of ``host`` a connection may go to, in the resolver's order."""
        loop = asyncio.get_running_loop()
        try:
            found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise FetchError(f"DNS lookup failed for {host} ({url}): {exc}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
        if self._forbidden is None:
            return addresses
        return allowed_addresses(host, addresses, self._forbidden)

    async def _connect_first(self, url: str, origin: Origin, addresses: list[str]) -> Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        tls = self._tls_context() if scheme == "https" else None
        failure: OSError | None = None
        for address in addresses:
            try:
                _, connection = await loop.create_connection(
                    lambda: Connection(self._read_timeout_s),
                    address,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                )
            except ssl.SSLCertVerificationError as exc:
                raise FetchError(
                    f"TLS certificate of {host} refused ({url}): {exc.verify_message or exc}",
                    transient=False,
                ) from None
            except ssl.SSLError as exc:
                raise FetchError(f"{url}: TLS handshake failed: {exc.reason or exc}") from None
            except OSError as exc:
                failure = exc
                continue
            assert isinstance(connection, Connection)
            self._open.add(connection)
            return connection
        reason = (failure.strerror or failure) if failure is not None else "no address"
        raise FetchError(f"cannot connect to {host}:{port} ({url}): {reason}")

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


def request_head(
    method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None
) -> bytes:
    """The bytes of a request: its line, ``Host``, ``headers`` in their order, the body.

    A ``Host`` in ``headers`` replaces ``host``; ``Content-Length`` is the body's own.

    Raises ``FetchError`` (permanent) for a header that would break the request's framing.
    """
    lines = [""]
    for name, value in headers.items():
        lowered = name.lower()
        if lowered == "host":
            host = value
        elif lowered != "content-length":
            lines.append(f"{name}: {value}\r\n")
    lines[0] = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n"
    if body is not None:
        lines.append(f"Content-Length: {len(body)}\r\n")
    lines.append("\r\n")
    text = "".join(lines)
    if text.count("\n") != len(lines) + 1 or "\r" in text.replace("\r\n", ""):
        raise FetchError(
            f"a request header or the method holds a line break: {method} {target}", transient=False
        )
    try:
        head = text.encode("latin-1")
    except UnicodeEncodeError:
        head = text.encode("utf-8")
    return head + body if body else head
