"""The wire against hostile and sloppy servers (issue #35): bounds on the head as it arrives,
what the parser forgives and what it refuses (decision 0045), faults named, trailers kept out
of the headers, cut or multi-member encoded bodies, connections not reused when a stray body
may follow."""

from __future__ import annotations

import asyncio
import gzip
import os
import time
import zlib
from collections.abc import AsyncIterator

import brotli
import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.connection import MAX_HEAD_BYTES, MAX_LINE_BYTES
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from tests.fixtures.scripted_server import Forever, ScriptedServer, serving
from tests.loop_lag import max_loop_lag_s

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
PAGE = b"<html><body>page</body></html>"


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    async with serving(ScriptedServer()) as script:
        yield script


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpFetcher]:
    fetcher = HttpFetcher(
        FetchOptions(
            allow_private_addresses=True, connect_timeout_s=2, read_timeout_s=2, total_timeout_s=8
        )
    )
    yield fetcher
    await fetcher.close()


def _request(url: str, method: str = "GET") -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d", method=method)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _fail_measured(fetcher: HttpFetcher, url: str) -> tuple[str, float, float, int]:
    """The error of a fetch that must fail, its time, the loop's longest stall and the
    process's peak RSS growth meanwhile (sampled every 5 ms)."""
    start_rss = peak_rss = _rss_bytes()
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak_rss
        while not stop.is_set():
            peak_rss = max(peak_rss, _rss_bytes())
            await asyncio.sleep(0.005)

    async def fetch() -> str:
        with pytest.raises(FetchError) as caught:
            await fetcher.fetch(_request(url))
        return str(caught.value)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    task = asyncio.ensure_future(fetch())
    lag_s = await max_loop_lag_s(task)
    elapsed_s = time.perf_counter() - started
    stop.set()
    await sampler
    return task.result(), elapsed_s, lag_s, peak_rss - start_rss


# The head, bounded as it arrives.


async def test_an_endless_header_line_fails_fast_in_bounded_memory_without_a_stall(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    # Before: the value grew one copy a read until the total timeout (here 8 s), hundreds
    # of MB, the loop stalled for each copy.
    scripted.replies = [[b"HTTP/1.1 200 OK\r\nX-Endless: ", Forever(b"a" * 65536)]]
    error, elapsed_s, lag_s, rss_growth = await _fail_measured(
        fetcher, f"http://127.0.0.1:{scripted.port}/"
    )
    assert f"malformed response: a header line past {MAX_LINE_BYTES} bytes" in error
    assert elapsed_s < 1.0
    assert lag_s < 0.25
    assert rss_growth < 8 * 1024 * 1024


async def test_endless_header_lines_fail_at_the_head_cap(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    line = b"X-Same: " + b"v" * 200 + b"\r\n"
    scripted.replies = [[b"HTTP/1.1 200 OK\r\n", Forever(line * 50)]]
    error, elapsed_s, lag_s, rss_growth = await _fail_measured(
        fetcher, f"http://127.0.0.1:{scripted.port}/"
    )
    assert f"malformed response: header section past {MAX_HEAD_BYTES} bytes" in error
    assert (elapsed_s < 1.0, lag_s < 0.25, rss_growth < 8 * 1024 * 1024) == (True,) * 3


async def test_a_header_line_past_the_bound_in_one_read_is_refused(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    big = b"X-Big: " + b"b" * MAX_LINE_BYTES + b"\r\n"
    scripted.replies = [b"HTTP/1.1 200 OK\r\n" + big + b"Content-Length: 2\r\n\r\nok"]
    with pytest.raises(FetchError, match=f"a header line past {MAX_LINE_BYTES} bytes"):
        await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))


async def test_a_header_line_within_the_bound_is_read(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    # aiohttp refuses a line past 8,190 bytes; real feeds send 8,488 (decision 0045).
    value = b"c" * (MAX_LINE_BYTES - 100)
    scripted.replies = [b"HTTP/1.1 200 OK\r\nX-Csp: " + value + b"\r\nContent-Length: 2\r\n\r\nok"]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.body, result.headers["x-csp"]) == (b"ok", value.decode())


async def test_a_head_and_a_line_split_across_reads_within_the_bounds_are_read(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    half = b"h" * (MAX_LINE_BYTES // 2 - 100)
    scripted.replies = [
        [
            b"HTTP/1.1 200 OK\r\nX-Long: " + half,
            0.05,
            half,
            0.05,
            b"\r\nContent-Length: 2\r\n\r\nok",
        ]
    ]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.body, result.headers["x-long"]) == (b"ok", (half * 2).decode())


async def test_a_line_past_the_bound_across_reads_is_refused(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    third = b"h" * (MAX_LINE_BYTES // 3 + 10)
    scripted.replies = [
        [b"HTTP/1.1 200 OK\r\nX-Long: " + third, 0.05, third, 0.05, third, 0.05, b"\r\n\r\n"]
    ]
    with pytest.raises(FetchError, match=f"a header line past {MAX_LINE_BYTES} bytes"):
        await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))


async def test_endless_interim_responses_fail_at_the_head_cap(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [[Forever(b"HTTP/1.1 100 Continue\r\n\r\n" * 100)]]
    error, *_ = await _fail_measured(fetcher, f"http://127.0.0.1:{scripted.port}/")
    assert f"header section past {MAX_HEAD_BYTES} bytes" in error


async def test_an_endless_trailer_fails_fast_in_bounded_memory(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Trailer: "
    scripted.replies = [[head, Forever(b"t" * 65536)]]
    error, elapsed_s, lag_s, rss_growth = await _fail_measured(
        fetcher, f"http://127.0.0.1:{scripted.port}/"
    )
    assert "chunk framing and trailers without a body byte" in error
    assert (elapsed_s < 1.0, lag_s < 0.25, rss_growth < 8 * 1024 * 1024) == (True,) * 3


# Trailers.


async def test_trailers_never_join_the_headers(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"%x\r\n%s\r\n0\r\nContent-Type: image/png\r\nX-Checksum: 1\r\n\r\n" % (len(PAGE), PAGE)
    ]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.body, result.headers["content-type"]) == (PAGE, "text/html")
    assert "x-checksum" not in result.headers


# What the parser forgives (RFC 9112 lets a user agent), with the body read as sent.

LENIENT = {
    "bare LF line ends (9112 2.2)": b"HTTP/1.1 200 OK\nContent-Type: text/html\nContent-Length: 2\n\nok",
    "bare LF after the status line only": b"HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok",
    "obs-fold with a space (9112 5.2)": (
        b"HTTP/1.1 200 OK\r\nX-Folded: one\r\n two\r\nContent-Length: 2\r\n\r\nok"
    ),
    "obs-fold with a tab": (
        b"HTTP/1.1 200 OK\r\nX-Folded: one\r\n\ttwo\r\nContent-Length: 2\r\n\r\nok"
    ),
    "obs-fold after an interim response": (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nX-Folded: one\r\n two\r\nContent-Length: 2\r\n\r\nok"
    ),
    "spaces after a chunk size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2  \r\nok\r\n0\r\n\r\n"
    ),
    "chunked not the last transfer coding (9112 6.3: to the close)": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, x-custom\r\nConnection: close\r\n\r\nok"
    ),
}


@pytest.mark.parametrize("reply", LENIENT.values(), ids=LENIENT.keys())
async def test_what_a_user_agent_may_forgive_is_read(
    fetcher: HttpFetcher, scripted: ScriptedServer, reply: bytes
) -> None:
    scripted.replies = [reply]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.status, result.body) == (200, b"ok")
    if b"X-Folded" in reply:
        assert result.headers["x-folded"] == "one two"


async def test_a_fold_split_across_reads_is_undone(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [
        [b"HTTP/1.1 200 OK\r\nX-Folded: one\r\n", 0.05, b" two\r\nContent-Length: 2\r\n\r\nok"]
    ]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert (result.body, result.headers["x-folded"]) == (b"ok", "one two")


# What it refuses: where leniency would let two parsers frame a response differently.

STRICT = {
    "Content-Length and Transfer-Encoding": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n",
        "invalid header",
    ),
    "two Content-Lengths": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
        "invalid header",
    ),
    "a folded Content-Length": (
        b"HTTP/1.1 200 OK\r\nContent-Length:\r\n 2\r\n\r\nok",
        "invalid header",
    ),
    "a folded Transfer-Encoding": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding:\r\n chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        "invalid header",
    ),
    "a space before the colon": (
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok",
        "invalid header",
    ),
    "a bare CR in a header": (
        b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 2\r\n\r\nok",
        "invalid header",
    ),
    "a NUL in a header value": (
        b"HTTP/1.1 200 OK\r\nX: a\0b\r\nContent-Length: 2\r\n\r\nok",
        "invalid header",
    ),
    "bare LF in chunk framing": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n",
        "invalid chunked body",
    ),
    "a bad chunk size": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "invalid chunked body",
    ),
    "no status line": (b"garbage\r\n\r\n", "bad status line"),
    "a status line cut by a bare CR": (b"HTTP/1.1 200 OK\rX", "bad status line"),
}


@pytest.mark.parametrize(("reply", "fault"), STRICT.values(), ids=STRICT.keys())
async def test_what_could_frame_a_response_two_ways_is_refused_naming_the_fault(
    fetcher: HttpFetcher, scripted: ScriptedServer, reply: bytes, fault: str
) -> None:
    scripted.replies = [reply]
    url = f"http://127.0.0.1:{scripted.port}/"
    with pytest.raises(FetchError, match=f"malformed response: {fault} \\(") as caught:
        await fetcher.fetch(_request(url))
    assert str(caught.value).startswith(url)
    assert "\n" not in str(caught.value)


# Cuts, named by where they fall.

CUTS = {
    "before a byte": (b"", "Server disconnected without a response"),
    "inside the status line": (
        b"HTTP/1.1 20",
        "the server closed the connection inside the response headers \\(after 11 bytes\\)",
    ),
    "inside the headers": (
        b"HTTP/1.1 200 OK\r\nContent-Le",
        "the server closed the connection inside the response headers",
    ),
    "inside the body": (
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        "response payload is not completed: the server closed the connection after 3 bytes",
    ),
    "inside the chunks": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
        "response payload is not completed: the server closed the connection after 2 bytes",
    ),
}


@pytest.mark.parametrize(("reply", "message"), CUTS.values(), ids=CUTS.keys())
async def test_a_cut_is_named_by_where_it_falls(reply: bytes, message: str) -> None:
    async with serving(ScriptedServer(close_after_reply=True)) as script:
        script.replies = [reply]
        fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
        try:
            with pytest.raises(FetchError, match=message) as caught:
                await fetcher.fetch(_request(f"http://127.0.0.1:{script.port}/"))
        finally:
            await fetcher.close()
    assert caught.value.transient is True


# Content codings, through the wire.

CUT_BODIES = {
    "gzip": gzip.compress(PAGE * 20)[:-12],
    "deflate": zlib.compress(PAGE * 20)[:-6],
    "br": brotli.compress(PAGE * 20)[:-4],
}


@pytest.mark.parametrize("coding", CUT_BODIES)
async def test_an_encoded_body_cut_short_is_an_error_not_a_page(
    fetcher: HttpFetcher, scripted: ScriptedServer, coding: str
) -> None:
    body = CUT_BODIES[coding]
    scripted.replies = [
        b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s"
        % (coding.encode(), len(body), body)
    ]
    with pytest.raises(FetchError, match=f"truncated {coding} body"):
        await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))


async def test_every_gzip_member_of_a_body_is_decoded(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    body = gzip.compress(b"<html><body>one") + gzip.compress(b" two</body></html>")
    scripted.replies = [
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
        % (len(body), body)
    ]
    result = await fetcher.fetch(_request(f"http://127.0.0.1:{scripted.port}/"))
    assert result.body == b"<html><body>one two</body></html>"


# A stray body after a response without one.


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
async def test_a_late_stray_body_never_reaches_the_next_request(
    fetcher: HttpFetcher, scripted: ScriptedServer, status: bytes
) -> None:
    # The body a 204/304 announced comes late, after the next request was sent.
    scripted.replies = [
        [b"HTTP/1.1 " + status + b"\r\nContent-Length: 5\r\n\r\n", 0.1, b"stray"],
        OK,
    ]
    url = f"http://127.0.0.1:{scripted.port}/"
    assert (await fetcher.fetch(_request(url + "a"))).status == int(status[:3])
    result = await fetcher.fetch(_request(url + "b"))
    assert (result.status, result.body, scripted.connections) == (200, b"ok", 2)


async def test_a_304_announcing_no_body_keeps_its_connection(
    fetcher: HttpFetcher, scripted: ScriptedServer
) -> None:
    scripted.replies = [b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n', OK]
    url = f"http://127.0.0.1:{scripted.port}/"
    await fetcher.fetch(_request(url))
    assert (await fetcher.fetch(_request(url))).body == b"ok"
    assert scripted.connections == 1
