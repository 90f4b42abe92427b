"""One keep-alive HTTP/1.1 connection, its response read by httptools (llhttp).

``fetchers.wire`` pools these. One ``Exchange`` at a time on a connection: llhttp does the
framing (Content-Length, chunked, interim responses, keep-alive), and the connection keeps
the fetcher's limits as the response is read: the body cap (declared length refused before
reading, a streamed body refused or cut), at most ``MAX_HEADERS`` headers and
``MAX_HEADER_BYTES`` of them (llhttp has no bound of its own), the read timeout (no data for
N s) and the fetch's deadline (``TimeoutError``), both on one timer an exchange, moved only
when it fires. Bytes after a response, or while no request waits, end the connection. Every
other failure is a ``FetchError`` naming the URL.
"""

from __future__ import annotations

import asyncio
from typing import cast

import httptools

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.decoding import body_too_large, raw_body_limit

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADERS = 256
_NO_BODY_STATUSES = frozenset({204, 304})


class Exchange:
    """What one request waits for: the response's status, headers and body, within limits."""

    __slots__ = (
        "bounded",
        "chunks",
        "cut_at",
        "deadline",
        "done",
        "error",
        "head_only",
        "header_bytes",
        "headers",
        "keep_alive",
        "limit",
        "peer",
        "size",
        "status",
        "unanswered",
        "url",
    )

    def __init__(
        self,
        url: str,
        limit: int,
        cut_at: int | None,
        head_only: bool,
        deadline: float,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.url = url
        self.deadline = deadline
        """The fetch's end (event loop time): past it, ``TimeoutError``."""
        self.limit = limit
        self.cut_at = cut_at
        """Keep this many bytes and stop reading, where more would fail (a body sent
        encoded is cut after decoding, by the caller)."""
        self.head_only = head_only
        self.done: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.size = 0
        self.header_bytes = 0
        self.bounded = False
        """The body's end is known (a length, chunks, or a status without a body)."""
        self.keep_alive = False
        self.error: FetchError | TimeoutError | None = None
        self.unanswered = False
        """The server closed the connection before a byte of the response."""
        self.peer: str | None = None
        """The server's IP address (the archive's ``WARC-IP-Address``)."""

    @property
    def body(self) -> bytes:
        body = b"".join(self.chunks)
        return body if self.cut_at is None else body[: self.limit]


class Connection(asyncio.Protocol):
    """One keep-alive connection to an origin; feeds what it reads to its exchange."""

    def __init__(self, read_timeout_s: float) -> None:
        self._read_timeout_s = read_timeout_s
        self._parser = httptools.HttpResponseParser(self)
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.exchange: Exchange | None = None
        self.closed = False
        self.idle_since = 0.0
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None

    # The transport's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
        address = transport.get_extra_info("peername")
        self.peer = str(address[0]) if address else None

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
        encoded = "content-encoding" in headers
        exchange.limit = raw_body_limit(exchange.limit, exchange.cut_at, encoded=encoded)
        if exchange.head_only:  # no body follows, whatever the headers say
            exchange.keep_alive = False
            self._finish(exchange)
            return
        too_long = declared is not None and declared.isdigit() and int(declared) > exchange.limit
        if too_long and exchange.cut_at is None:
            raise body_too_large(exchange.url, exchange.limit, declared)

    def on_body(self, body: bytes) -> None:
        exchange = self._current()
        exchange.chunks.append(body)
        exchange.size += len(body)
        if exchange.size > exchange.limit:
            if exchange.cut_at is None:
                raise body_too_large(exchange.url, exchange.limit)
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
        exchange.peer = self.peer
        self._last_read = self._loop.time()
        wake = min(self._last_read + self._read_timeout_s, exchange.deadline)
        self._timer = self._loop.call_at(wake, self._check)
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
        now = self._loop.time()
        if now >= exchange.deadline:
            self._fail(TimeoutError())
            return
        quiet_until = self._last_read + self._read_timeout_s
        if now < quiet_until:
            self._timer = self._loop.call_at(min(quiet_until, exchange.deadline), self._check)
            return
        self._fail(
            FetchError(f"timeout reading {exchange.url}: no data for {self._read_timeout_s}s")
        )

    def _finish(self, exchange: Exchange) -> None:
        if not exchange.done.done():
            exchange.done.set_result(None)

    def _fail(self, error: FetchError | TimeoutError) -> None:
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
        if isinstance(exc.__context__, FetchError):  # raised by a callback above
            return exc.__context__
        reason = str(exc) or type(exc).__name__
        if not exchange.status:
            reason = f"Bad status line ({reason})"
        return FetchError(f"{exchange.url}: malformed response: {reason}")
