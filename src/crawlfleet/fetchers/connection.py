"""One keep-alive HTTP/1.1 connection, its response read by httptools (llhttp).

``fetchers.wire`` pools these. One ``Exchange`` at a time on a connection: llhttp does the
framing (Content-Length, chunked, interim responses, keep-alive), and the connection keeps
the fetcher's limits as the response is read: the body cap (declared length refused before
reading, a streamed body refused or cut), the read timeout (no data for N s) and the fetch's
deadline (``TimeoutError``), both on one timer an exchange, moved only when it fires. Bytes
after a response, or while no request waits, end the connection. Every other failure is a
``FetchError`` naming the URL and the fault (a bad status line, an invalid header, a header
section too large, a cut inside the headers or the body, ...).

llhttp keeps no bound of its own on a head, and httptools grows an unfinished header value
by one copy a read (quadratic in its length), so the head's bytes are bounded as they arrive:
at most ``MAX_HEAD_BYTES`` are fed to the parser before the final response's headers end
(interim responses included), no line may grow past ``MAX_LINE_BYTES``, at most
``MAX_HEADERS`` headers; chunk framing and trailers get ``MAX_HEAD_BYTES`` between two body
bytes. Trailers never join the headers (RFC 9110 section 6.5.1).

What the parser forgives, and what it does not (docs/decisions/0045): a bare LF as a line
end of the head, spaces after a chunk size, obs-fold in a header other than a framing one
(the head parsed again with each fold replaced by a space, only after a parse error),
``Transfer-Encoding`` not ending in chunked (the body read to the close).
"""

from __future__ import annotations

import asyncio
import re
from typing import cast

import httptools

from crawlfleet.errors import FetchError
from crawlfleet.fetchers.decoding import body_too_large, raw_body_limit

MAX_HEAD_BYTES = 64 * 1024
MAX_LINE_BYTES = 16 * 1024
MAX_HEADERS = 256
MAX_UNFOLDS = 4
"""Parses of a head again with its folds undone, an exchange (a fold may straddle reads)."""
_NO_BODY_STATUSES = frozenset({204, 304})
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_FOLD = re.compile(rb"\r?\n[ \t]+")
_FOLDED_FRAMING = re.compile(rb"(?im)^(?:content-length|transfer-encoding)[ \t]*:[^\n]*\n[ \t]")
_INTERIM = re.compile(rb"HTTP/\d\.\d 1\d\d")
_STATUS_LINE_FAULTS = ("version", "HTTP/", "status", "response line")


def location_header(url: str, headers: dict[str, str], value: bytes) -> None:
    """Keep a ``Location`` value with its bytes past ASCII percent-encoded (raw UTF-8
    ``/é`` is read ``/%C3%A9``, as browsers read it; the URL parser decodes an escaped host);
    a second, different ``Location`` fails the response, as Chromium fails it."""
    text = value.decode("latin-1")
    if not value.isascii():
        text = "".join(c if c < "\x80" else f"%{ord(c):02X}" for c in text)
    held = headers.get("location")
    if held is not None and held != text:
        raise FetchError(f"{url}: malformed response: two different Location headers")
    headers["location"] = text


class Exchange:
    """What one request waits for: the response's status, headers and body, within limits."""

    __slots__ = (
        "body_may_follow",
        "bounded",
        "chunks",
        "cut_at",
        "deadline",
        "done",
        "error",
        "head_bytes",
        "head_chunks",
        "head_done",
        "head_only",
        "headers",
        "keep_alive",
        "limit",
        "line_bytes",
        "peer",
        "quiet_bytes",
        "size",
        "status",
        "unanswered",
        "unfolds",
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
        self.head_done = False
        """The final response's headers are read (interim responses skipped)."""
        self.head_bytes = 0
        """Bytes of reads that did not end the head (kept in ``head_chunks``)."""
        self.head_chunks: list[bytes] = []
        self.line_bytes = 0
        """Bytes of the head's last, unfinished line."""
        self.quiet_bytes = 0
        """Bytes read since the last body byte (chunk framing, trailers)."""
        self.unfolds = 0
        self.bounded = False
        """The body's end is known (a length, chunks, or a status without a body)."""
        self.body_may_follow = False
        """A 204 or 304 whose headers announce a body: bytes may still come after it."""
        self.keep_alive = False
        self.error: FetchError | TimeoutError | None = None
        self.unanswered = False
        """The server closed the connection before a byte of the response."""
        self.peer: str | None = None
        """The server's IP address (the archive's ``WARC-IP-Address``)."""

    def take_body(self) -> bytes:
        """The body read, handed over once: the chunks are let go, so a pooled connection
        does not keep its last response's body alive while it waits for the next request."""
        body = b"".join(self.chunks)
        self.chunks = []
        return body if self.cut_at is None else body[: self.limit]

    def restart_head(self) -> None:
        """Forget what was parsed of the head, to parse it again from its first byte."""
        self.status = 0
        self.headers = {}
        self.head_bytes = 0
        self.head_chunks = []
        self.line_bytes = 0


class Connection(asyncio.Protocol):
    """One keep-alive connection to an origin; feeds what it reads to its exchange."""

    def __init__(self, read_timeout_s: float) -> None:
        self._read_timeout_s = read_timeout_s
        self._parser = _response_parser(self)
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
        self._feed(exchange, data)

    def eof_received(self) -> bool:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._ended()

    # Reading: the head within its bounds, then the body.

    def _read_head(self, exchange: Exchange, data: bytes) -> None:
        """Feed a read to the parser, at most ``MAX_HEAD_BYTES`` of it before the head ends."""
        room = MAX_HEAD_BYTES - exchange.head_bytes
        if len(data) > room:
            view = memoryview(data)
            self._parser.feed_data(view[:room])
            if exchange.head_done:
                if not exchange.done.done():
                    self._read_body(exchange, view[room:])
                return
            self._count_head(exchange, data, room)
            raise FetchError(
                f"{exchange.url}: malformed response: header section past {MAX_HEAD_BYTES} bytes"
            )
        self._parser.feed_data(data)
        if not exchange.head_done:
            self._count_head(exchange, data, len(data))
            exchange.head_chunks.append(data)

    def _count_head(self, exchange: Exchange, data: bytes, fed: int) -> None:
        """Count ``fed`` bytes of ``data`` into a head not ended yet; refuse a line too long."""
        exchange.head_bytes += fed
        end = data.rfind(b"\n", 0, fed)
        exchange.line_bytes = exchange.line_bytes + fed if end < 0 else fed - end - 1
        if exchange.line_bytes > MAX_LINE_BYTES:
            raise FetchError(
                f"{exchange.url}: malformed response: a header line past {MAX_LINE_BYTES} bytes"
            )

    def _read_body(self, exchange: Exchange, data: bytes | memoryview) -> None:
        size = exchange.size
        self._parser.feed_data(data)
        if exchange.size != size or exchange.done.done():
            exchange.quiet_bytes = 0
            return
        exchange.quiet_bytes += len(data)
        if exchange.quiet_bytes > MAX_HEAD_BYTES:
            raise FetchError(
                f"{exchange.url}: malformed response: more than {MAX_HEAD_BYTES} bytes of "
                "chunk framing and trailers without a body byte"
            )

    def _feed(self, exchange: Exchange, data: bytes) -> None:
        try:
            if exchange.head_done:
                self._read_body(exchange, data)
            else:
                self._read_head(exchange, data)
        except httptools.HttpParserUpgrade:
            self._fail(FetchError(f"{exchange.url}: malformed response: an upgrade"))
        except httptools.HttpParserError as exc:
            if not self._unfold(exchange, data, exc):
                self._fail(self._malformed(exchange, data, exc))
        except FetchError as exc:
            self._fail(exc)

    def _unfold(self, exchange: Exchange, data: bytes, exc: httptools.HttpParserError) -> bool:
        """After llhttp refused a head: parse it again from its first byte with its obs-folds
        replaced by SP (RFC 9112 section 5.2). False when that cannot help."""
        if (
            exchange.head_done
            or isinstance(exc.__context__, FetchError)
            or exchange.unfolds >= MAX_UNFOLDS
        ):
            return False
        raw = b"".join([*exchange.head_chunks, data])
        unfolded = _unfolded(raw)
        if unfolded is None or unfolded == raw:
            return False
        exchange.unfolds += 1
        exchange.restart_head()
        self._parser = _response_parser(self)
        self._feed(exchange, unfolded)
        return True

    # The parser's side (httptools calls these from ``feed_data``).

    def on_header(self, name: bytes, value: bytes) -> None:
        exchange = self._current()
        if exchange.head_done:  # a trailer: never one of the headers (RFC 9110 6.5.1)
            return
        headers = exchange.headers
        if len(name) + len(value) > MAX_LINE_BYTES:
            raise FetchError(
                f"{exchange.url}: malformed response: a header line past {MAX_LINE_BYTES} bytes"
            )
        if len(headers) >= MAX_HEADERS:
            raise FetchError(f"{exchange.url}: malformed response: more than {MAX_HEADERS} headers")
        key = name.decode("latin-1").lower()
        if key == "location":
            location_header(exchange.url, headers, value)
            return
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        exchange = self._current()
        parser = self._parser
        exchange.status = status = parser.get_status_code()
        if 100 <= status < 200:
            return
        exchange.head_done = True
        headers = exchange.headers
        declared = headers.get("content-length")
        coding = headers.get("transfer-encoding")
        # Chunked framing only when chunked is the last coding; else to the close (RFC 9112 6.3).
        chunked = coding is not None and _last_coding(coding) == "chunked"
        if status in _NO_BODY_STATUSES:
            exchange.bounded = True
            exchange.body_may_follow = coding is not None or declared not in (None, "0")
        else:
            exchange.bounded = declared is not None or chunked
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
            return
        # After a 204 or 304 that announced a body, the body may still come: not reused.
        exchange.keep_alive = self._parser.should_keep_alive() and not exchange.body_may_follow
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
        url = exchange.url
        if exchange.head_done and not exchange.bounded:
            exchange.keep_alive = False
            self._finish(exchange)
        elif exchange.head_done:
            self._fail(
                FetchError(
                    f"{url}: response payload is not completed: the server closed "
                    f"the connection after {exchange.size} bytes of the body"
                )
            )
        elif exchange.head_bytes:
            self._fail(
                FetchError(
                    f"{url}: the server closed the connection inside the response headers "
                    f"(after {exchange.head_bytes} bytes)"
                )
            )
        else:
            exchange.unanswered = True
            self._fail(FetchError(f"{url}: Server disconnected without a response"))

    def _malformed(self, exchange: Exchange, data: bytes, exc: Exception) -> FetchError:
        """The error for a response llhttp refused, naming where: status line, headers, body."""
        if isinstance(exc.__context__, FetchError):  # raised by a callback above
            return exc.__context__
        reason = str(exc) or type(exc).__name__
        if exchange.head_done:
            fault = "invalid chunked body" if "chunk" in reason else "invalid body"
        elif any(word in reason for word in _STATUS_LINE_FAULTS) or not (
            b"\n" in data or any(b"\n" in chunk for chunk in exchange.head_chunks)
        ):
            fault = "bad status line"
        else:
            fault = "invalid header"
        return FetchError(f"{exchange.url}: malformed response: {fault} ({reason})")


def _response_parser(connection: Connection) -> httptools.HttpResponseParser:
    """llhttp as this module reads responses: bare LF line ends in the head, spaces after a
    chunk size; strict on everything else (docs/decisions/0045)."""
    parser = httptools.HttpResponseParser(connection)
    parser.set_dangerous_leniencies(
        lenient_optional_cr_before_lf=True, lenient_spaces_after_chunk_size=True
    )
    return parser


def _last_coding(transfer_encoding: str) -> str:
    return transfer_encoding.rpartition(",")[2].strip(" \t").lower()


def _unfolded(raw: bytes) -> bytes | None:
    """``raw`` (the bytes of an exchange's heads, and of its body after them) with every
    obs-fold of a head replaced by a space (RFC 9112 section 5.2); the body left as it is.

    ``None`` when a fold continues ``Content-Length`` or ``Transfer-Encoding``: the framing
    of a response is never guessed.
    """
    parts: list[bytes] = []
    rest = raw
    while True:
        end = _HEAD_END.search(rest)
        head = rest if end is None else rest[: end.start()]
        if _FOLDED_FRAMING.search(head):
            return None
        parts.append(_FOLD.sub(b" ", head))
        if end is None:
            return b"".join(parts)
        parts.append(end.group())
        rest = rest[end.end() :]
        if not _INTERIM.match(head):  # the final response: its body follows as it is
            parts.append(rest)
            return b"".join(parts)
