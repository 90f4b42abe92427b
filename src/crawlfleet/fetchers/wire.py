"""HTTP/1.1 exchanges on pooled keep-alive connections, parsed by httptools (llhttp).

The HTTP fetcher's direct requests go through here; requests through a proxy still go
through aiohttp (``fetchers.http``). Why: docs/decisions/0038-http-exchanges-on-httptools.md.

One ``Exchange`` at a time on a connection. A connection goes back to its origin's idle
pool only when its response was read whole and both sides keep it alive; any other end
(an error, a cut body, a cancelled fetch) aborts it. Idle connections are closed after
``KEEPALIVE_S``. Every address a connection goes to passes ``forbidden`` first (the
resolver's answer, not a name), when a predicate is given.

Every failure is a ``FetchError`` (or subclass) naming the URL, in one line.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping
from typing import cast

import httptools

from crawlfleet.errors import FetchError, ForbiddenAddress, TooLarge
from crawlfleet.fetchers.addresses import AddressPredicate, parse_ip

KEEPALIVE_S = 15.0
MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 256
_NO_BODY_STATUSES = frozenset({204, 304})
Origin = tuple[str, str, int]


class Exchange:
    """What one request waits for: the response's status, headers and body, within limits."""

    __slots__ = (
        "bounded",
        "chunks",
        "cut_at",
        "done",
        "error",
        "head_only",
        "header_bytes",
        "headers",
        "keep_alive",
        "limit",
        "size",
        "status",
        "truncate",
        "unanswered",
        "url",
    )

    def __init__(self, url: str, limit: int, cut_at: int | None, head_only: bool) -> None:
        self.url = url
        self.limit = limit
        self.cut_at = cut_at
        """Keep this many bytes and stop reading, where more would fail (a body sent
        encoded is cut after decoding, by the caller)."""
        self.truncate = cut_at is not None
        self.head_only = head_only
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = 0
        self.header_bytes = 0
        self.bounded = False
        """The body's end is known (a length, chunks, or a status without a body)."""
        self.keep_alive = False
        self.error: FetchError | None = None
        self.unanswered = False
        """The server closed the connection before a byte of the response."""

    @property
    def body(self) -> bytes:
        body = b"".join(self.chunks)
        return body[: self.limit] if self.truncate else body


class Connection(asyncio.Protocol):
    """One keep-alive connection to an origin; feeds what it reads to its exchange."""

    def __init__(self, read_timeout_s: float) -> None:
        self._read_timeout_s = read_timeout_s
        self._parser = httptools.HttpResponseParser(self)
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # The transport's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None or exchange.done.done():  # bytes nobody asked for
            self.abort()
            return
        self._last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(FetchError(f"{exchange.url}: malformed response: an upgrade"))
        except httptools.HttpParserError as exc:
            self._fail(self._malformed(exchange, exc))

    def eof_received(self) -> bool:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._ended()

    # The parser's side (httptools calls these from ``feed_data``).

    def on_header(self, name: bytes, value: bytes) -> None:
        exchange = self._current()
        exchange.header_bytes += len(name) + len(value) + 4
        headers = exchange.headers
        if exchange.header_bytes > MAX_HEADER_BYTES or len(headers) >= MAX_HEADERS:
            raise FetchError(f"{exchange.url}: malformed response: headers too large")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        exchange = self._current()
        parser = self._parser
        exchange.status = status = parser.get_status_code()
        if 100 <= status < 200:
            return
        headers = exchange.headers
        declared = headers.get("content-length")
        exchange.bounded = (
            declared is not None
            or "chunked" in headers.get("transfer-encoding", "").lower()
            or status in _NO_BODY_STATUSES
        )
        if exchange.cut_at is not None and "content-encoding" not in headers:
            exchange.limit = min(exchange.limit, exchange.cut_at)
        if exchange.head_only:  # no body follows, whatever the headers say
            exchange.keep_alive = False
            self._finish(exchange)
            return
        too_long = declared is not None and declared.isdigit() and int(declared) > exchange.limit
        if too_long and not exchange.truncate:
            raise TooLarge(
                f"{exchange.url}: Content-Length {declared} exceeds {exchange.limit} bytes"
            )

    def on_body(self, body: bytes) -> None:
        exchange = self._current()
        exchange.chunks.append(body)
        exchange.size += len(body)
        if exchange.size > exchange.limit:
            if not exchange.truncate:
                raise TooLarge(f"{exchange.url}: body exceeds {exchange.limit} bytes")
            exchange.keep_alive = False  # the rest is left unread
            self._finish(exchange)

    def on_message_complete(self) -> None:
        exchange = self._current()
        if 100 <= exchange.status < 200:  # an interim response: the real one follows
            exchange.headers = {}
            exchange.header_bytes = 0
            return
        exchange.keep_alive = self._parser.should_keep_alive()
        self._finish(exchange)

    def _current(self) -> Exchange:
        """The exchange bytes are read for; past its end they are junk, and end the connection."""
        exchange = self.exchange
        assert exchange is not None
        if exchange.done.done():
            raise FetchError(f"{exchange.url}: bytes after the response")
        return exchange

    # Waiting for a response.

    async def send(self, exchange: Exchange, head: bytes) -> None:
        """Write a request and wait until ``exchange`` is done or failed."""
        assert self.transport is not None
        self.exchange = exchange
        self._last_read = self._loop.time()
        self._timer = self._loop.call_at(self._last_read + self._read_timeout_s, self._check)
        self.transport.write(head)
        try:
            await exchange.done
        finally:
            self._timer.cancel()
        if exchange.error is not None:
            raise exchange.error

    def reusable(self) -> bool:
        """True if the last exchange ended cleanly and the connection may carry another."""
        exchange = self.exchange
        return (
            not self.closed
            and exchange is not None
            and exchange.error is None
            and exchange.keep_alive
            and exchange.done.done()
        )

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _check(self) -> None:
        exchange = self.exchange
        if exchange is None or exchange.done.done():
            return
        quiet_until = self._last_read + self._read_timeout_s
        if self._loop.time() < quiet_until:
            self._timer = self._loop.call_at(quiet_until, self._check)
            return
        self._fail(
            FetchError(f"timeout reading {exchange.url}: no data for {self._read_timeout_s}s")
        )

    def _finish(self, exchange: Exchange) -> None:
        if not exchange.done.done():
            exchange.done.set_result(None)

    def _fail(self, error: FetchError) -> None:
        exchange = self.exchange
        self.abort()
        if exchange is not None and not exchange.done.done():
            exchange.error = error
            exchange.done.set_result(None)

    def _ended(self) -> None:
        """The server closed its side: the end of an unbounded body, else a failure."""
        exchange = self.exchange
        self.closed = True
        if exchange is None or exchange.done.done():
            return
        if exchange.status >= 200 and not exchange.bounded:
            exchange.keep_alive = False
            self._finish(exchange)
        elif exchange.status:
            self._fail(
                FetchError(
                    f"{exchange.url}: response payload is not completed: the server closed "
                    f"the connection after {exchange.size} bytes of the body"
                )
            )
        else:
            exchange.unanswered = True
            self._fail(FetchError(f"{exchange.url}: Server disconnected without a response"))

    def _malformed(self, exchange: Exchange, exc: Exception) -> FetchError:
        if isinstance(exc.__cause__, FetchError):  # raised by a callback above
            return exc.__cause__
        if isinstance(exc.__context__, FetchError):
            return exc.__context__
        reason = str(exc) or type(exc).__name__
        if not exchange.status and "headers too large" not in reason:
            reason = f"Bad status line ({reason})"
        return FetchError(f"{exchange.url}: malformed response: {reason}")


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
    ) -> Exchange:
        """Send ``head`` (request line, headers and body) to ``origin``; the response read.

        A body past ``limit`` bytes fails with ``TooLarge``, unless ``cut_at`` is given: then
        the first ``limit`` bytes are kept (at most ``cut_at`` of a body sent as it is).

        A reused connection that the server closed before answering is retried once on a
        new one, for an ``idempotent`` request.
        """
        connection = self._idle_connection(origin)
        reused = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(url, origin)
            exchange = Exchange(url, limit, cut_at, head_only)
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

    async def _connect(self, url: str, origin: Origin) -> Connection:
        _, host, port = origin
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                addresses = await self._addresses(url, host, port)
                return await self._connect_first(url, origin, addresses)
        except TimeoutError:
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
        allowed = [a for a in addresses if not self._refused(a)]
        if not allowed:
            listed = ", ".join(sorted(addresses)) or "nothing"
            raise ForbiddenAddress(f"{host} resolves to {listed}, which is not allowed")
        return allowed

    def _refused(self, address: str) -> bool:
        assert self._forbidden is not None
        parsed = parse_ip(address)
        return parsed is None or self._forbidden(parsed)

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
