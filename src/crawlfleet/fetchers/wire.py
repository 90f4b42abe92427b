"""The HTTP transport: HTTP/1.1 exchanges on pooled keep-alive connections
(``fetchers.connection``), directly or through an HTTP proxy.

Every request of the HTTP fetcher goes through here (``fetchers.transport.Transport``). Why
our own client: docs/decisions/0038-http-exchanges-on-httptools.md; why proxies too:
docs/decisions/0060-one-http-transport-seam.md.

Through a proxy, a plain-http request goes to the proxy in absolute form
(``GET http://host/path HTTP/1.1``, RFC 9112 section 3.2.2) with the proxy's
``Proxy-Authorization``; an https one opens a tunnel (``CONNECT host:port``, with the
credentials), then TLS to the server inside it (``loop.start_tls``), then the request as it
goes directly. A proxy that refuses the tunnel (any status but 2xx: a 407, a 502) fails the
request with a ``FetchError`` naming the status; its answer to a plain-http request is the
response, whatever its status (``runtime.fetching.proxy_link`` judges it).

Connections are pooled by their target's origin, and through a proxy by the proxy (with its
credentials) and the origin: a tunnel carries one origin, and the same proxy with other
credentials is another session of the proxy. A connection goes back to its pool only when
its response was read whole and both sides keep it alive; any other end (an error, a cut
body, a cancelled fetch) aborts it. Idle connections are closed after ``KEEPALIVE_S``. Every
address a direct connection goes to passes ``forbidden`` first (the resolver's answer, not a
name), when a predicate is given; a proxy's own address is the operator's choice and is not
checked (through a proxy the proxy resolves the host: the fetcher checks a literal IP).

Every failure is a ``FetchError`` (or subclass) naming the URL, in one line, but the fetch's
deadline, a ``TimeoutError`` (the fetcher names it).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.addresses import AddressPredicate, resolve
from crawlfleet.fetchers.connection import Connection, Exchange
from crawlfleet.fetchers.target import Target
from crawlfleet.fetchers.transport import Proxy

KEEPALIVE_S = 15.0
Origin = tuple[str, str, int]
PoolKey = Origin | tuple[str, str, int, Proxy]
"""An origin, or a proxy's pool of an origin."""
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


class Wire:
    """Pools of keep-alive connections by origin (and proxy), with their connect and read
    timeouts; a ``fetchers.transport.Transport``."""

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
        self._idle: dict[PoolKey, list[Connection]] = {}
        self._open: set[Connection] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._tls: ssl.SSLContext | None = None

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
    ) -> Exchange:
        """One request and its response read (``fetchers.transport.Transport.send``).

        A body past ``limit`` bytes fails with ``TooLarge``, unless ``cut_at`` is given: then
        the first ``limit`` bytes are kept (at most ``cut_at`` of a body sent as it is).

        A reused connection that the server closed before answering is retried once on a
        new one, for an idempotent method. Past ``deadline`` (event loop time), connecting
        or reading, ``TimeoutError``.
        """
        if proxy is not None and target.scheme == "http":  # absolute form, with credentials
            absolute = f"http://{target.authority}{target.path_qs}"
            if proxy.authorization is not None:
                headers = {**headers, "Proxy-Authorization": proxy.authorization}
            head = request_head(method, absolute, target.authority, headers, body)
        else:  # directly, or in a tunnel
            head = request_head(method, target.path_qs, target.authority, headers, body)
        loop = asyncio.get_running_loop()
        origin = target.origin
        key: PoolKey = origin if proxy is None else (*origin, proxy)
        head_only = method == "HEAD"
        connection = self._idle_connection(key)
        reused = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(url, origin, proxy, deadline)
            exchange = Exchange(url, limit, cut_at, head_only, deadline, loop)
            try:
                await connection.send(exchange, head)
            except BaseException:
                self._drop(connection)
                if reused and exchange.unanswered and method in _IDEMPOTENT:
                    reused, connection = False, None
                    continue
                raise
            self._release(key, connection)
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

    def _idle_connection(self, key: PoolKey) -> Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
            self._open.discard(connection)
        return None

    def _drop(self, connection: Connection) -> None:
        connection.abort()
        self._open.discard(connection)

    def _release(self, key: PoolKey, connection: Connection) -> None:
        if not connection.reusable():
            self._drop(connection)
            return
        idle = self._idle.setdefault(key, [])
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
        for key, idle in list(self._idle.items()):
            kept = [c for c in idle if c.idle_since > stale and not c.closed]
            for connection in idle:
                if connection not in kept:
                    self._drop(connection)
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        self._sweep = loop.call_later(KEEPALIVE_S, self._close_idle) if self._idle else None

    async def _connect(
        self, url: str, origin: Origin, proxy: Proxy | None, deadline: float
    ) -> Connection:
        """A new connection for ``origin`` (through ``proxy``), within the connect timeout:
        a tunnel and its TLS handshake included."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(min(loop.time() + self._connect_timeout_s, deadline)):
                if proxy is not None:
                    return await self._through_proxy(url, origin, proxy, deadline)
                scheme, host, port = origin
                addresses = await resolve(url, host, port, self._forbidden)
                tls = self._tls_context() if scheme == "https" else None
                return await self._connect_first(url, host, port, addresses, tls)
        except TimeoutError:
            if loop.time() >= deadline:
                raise
            raise FetchError(
                f"timeout connecting to {url} after {self._connect_timeout_s}s"
            ) from None

    async def _through_proxy(
        self, url: str, origin: Origin, proxy: Proxy, deadline: float
    ) -> Connection:
        """A connection to ``proxy``; for an https origin, TLS to the origin through a tunnel
        the proxy opened."""
        scheme, host, port = origin
        addresses = await resolve(url, proxy.host, proxy.port, None)  # the operator's choice
        connection = await self._connect_first(url, proxy.host, proxy.port, addresses, None)
        connection.peer = None  # the proxy's address, not the server's
        if scheme == "http":
            return connection
        try:
            return await self._tunnel(url, connection, host, port, proxy, deadline)
        except BaseException:
            self._drop(connection)
            raise

    async def _tunnel(
        self, url: str, connection: Connection, host: str, port: int, proxy: Proxy, deadline: float
    ) -> Connection:
        """``CONNECT host:port`` on ``connection``, then TLS to ``host`` inside the tunnel."""
        loop = asyncio.get_running_loop()
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        headers = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else {}
        head = request_head("CONNECT", authority, authority, headers, None)
        # The proxy's answer ends with its head: read as a HEAD's (no body awaited).
        answer = Exchange(url, 0, None, True, deadline, loop)
        await connection.send(answer, head)
        if not 200 <= answer.status < 300:
            raise FetchError(
                f"{url}: proxy {proxy.host}:{proxy.port} refused the tunnel to {authority}: "
                f"{answer.status}"
            )
        raw = connection.transport
        assert raw is not None
        inner = Connection(self._read_timeout_s)
        try:
            tls = await loop.start_tls(raw, inner, self._tls_context(), server_hostname=host)
        except ssl.SSLError as exc:
            raise _tls_failure(exc, host, url) from None
        if tls is None:  # the proxy closed the connection during the handshake
            raise FetchError(f"{url}: proxy {proxy.host}:{proxy.port} closed the tunnel")
        self._open.discard(connection)
        inner.connection_made(tls)  # start_tls does not call it
        inner.peer = None
        self._open.add(inner)
        return inner

    async def _connect_first(
        self,
        url: str,
        host: str,
        port: int,
        addresses: list[str],
        tls: ssl.SSLContext | None,
    ) -> Connection:
        loop = asyncio.get_running_loop()
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
            except ssl.SSLError as exc:
                raise _tls_failure(exc, host, url) from None
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


def _tls_failure(exc: ssl.SSLError, host: str, url: str) -> FetchError:
    """A refused certificate (permanent) or another failed handshake (transient)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return FetchError(
            f"TLS certificate of {host} refused ({url}): {exc.verify_message or exc}",
            transient=False,
        )
    return FetchError(f"{url}: TLS handshake failed: {exc.reason or exc}")


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
