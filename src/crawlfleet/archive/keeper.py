"""What a fetched response becomes in the archive: a ``request`` and a ``response`` record, or
a ``revisit`` when the page is unchanged since its last capture.

A 304, or a 200 whose payload digest equals the URL's newest capture's, is written as a
``revisit`` record (profile identical-payload-digest) holding only the response's head and
pointing at that capture (``WARC-Refers-To-Target-URI``/``-Date``): an unchanged page is
not stored twice. The responses kept in one turn of the event loop are written together
when it ends (``Archive.keep``), and every record is written to its file (handed to the OS)
before ``keep`` returns, so before the crawl step that fetched it completes its lease. Index
rows are written in batches (``IndexBatch``; the distributed runtime's of one row): a process
killed mid-crawl may leave its last second of captures in the files but not in the index.
"""

from __future__ import annotations

import asyncio
import time

import orjson

from crawlfleet.archive.protocols import Capture, CaptureIndex, Sent
from crawlfleet.archive.warc import (
    REVISIT_PROFILE,
    WarcFiles,
    http_request_head,
    http_response_head,
    payload_digest,
    record_id,
    warc_date,
    warc_fields,
    warc_record,
)
from crawlfleet.models import FetchResult

NOT_MODIFIED = 304
RENDERED_HEADER = "X-Crawlfleet-Rendered"
"""``dom`` on a browser page's record: its payload is the rendered DOM (UTF-8 markup), not the
bytes the server sent."""
PAYLOAD_HEADER = "X-Crawlfleet-Payload"
"""``decoded`` on a response whose payload is the body with its content codings undone (the
impersonate fetcher's: libcurl decodes), not the bytes sent; its ``Content-Encoding`` and
``Content-Length`` headers are renamed ``X-Crawlfleet-Was-...``."""
FETCH_HEADER = "X-Crawlfleet-Fetch"
"""``page`` on a crawl step's records, ``side`` on robots.txt and sitemap reads (never parsed
by a reparse)."""


_UNCODED = frozenset({"", "identity"})


def _server_coded(result: FetchResult, sent: Sent) -> bool:
    """Whether the payload kept is the body compressed by the server (``Content-Encoding``):
    its record is stored without deflating it again (decision 0064)."""
    if sent.decoded or result.fetcher == "browser":
        return False
    return result.headers.get("content-encoding", "").strip().lower() not in _UNCODED


_MINE_BITS = 1 << 23
_MINE_MASK = _MINE_BITS - 1


def _host_and_target(url: str) -> tuple[str, str]:
    """An absolute URL's authority and request target (path and query, ``/`` for none), as
    ``urlsplit`` gives them, without its cost (5 µs a page)."""
    start = url.find("//") + 2
    end = len(url)
    for stop in "/?#":
        found = url.find(stop, start, end)
        if found != -1:
            end = found
    target = url[end:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    return url[start:end], target


class IndexBatch:
    """Captures on their way to a ``CaptureIndex``: written every ``max_rows``, at most
    ``max_age_s`` after they came (a timer: a worker's last captures are written while it
    waits for more work) and at ``close``; ``latest`` sees them until they are written. A
    failed background write is raised by the next ``add`` (and ``close``).

    One index row a transaction cost 70 µs a page, a third of archiving it (decision 0049).
    ``threaded``: the index is a network database (PostgreSQL), called from a thread so the
    event loop never waits on it; an SQLite index is called in place.

    ``alone``: no one else writes the index (an embedded crawl: its state directory is
    locked). When it then holds no capture at the start (a first crawl), ``latest`` asks it
    only about URLs this batch added: a Bloom filter (``_MINE_BITS`` bits, two a URL) of
    them answers "never captured" for the others without a query (4-8 µs a page, decision
    0049). Past a million URLs the filter fills and more of them are asked (1 in 22 at a
    million): slower, never wrong.
    """

    def __init__(
        self,
        index: CaptureIndex,
        *,
        max_rows: int = 256,
        max_age_s: float = 1.0,
        threaded: bool = False,
        alone: bool = False,
    ) -> None:
        self._index = index
        self._mine = bytearray(_MINE_BITS // 8) if alone and not index.find(limit=1) else None
        self._max_rows = max_rows
        self._max_age_s = max_age_s
        self._threaded = threaded
        self._pending: dict[str, Capture] = {}
        self._rows: list[Capture] = []
        self._since = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        self._writes: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None

    async def add(self, *captures: Capture) -> None:
        """Add ``captures``; written together when they fill the batch (``max_rows=1``: at
        once, in one transaction)."""
        if self._failure is not None:
            raise self._failure
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._max_age_s, self._flush_soon)
        self._rows.extend(captures)
        for capture in captures:
            if capture.kind != "response":
                continue
            self._pending[capture.url] = capture
            if self._mine is not None:
                h = hash(capture.url)
                self._mine[(h & _MINE_MASK) >> 3] |= 1 << (h & 7)
                self._mine[((h >> 32) & _MINE_MASK) >> 3] |= 1 << ((h >> 32) & 7)
        if len(self._rows) >= self._max_rows or time.monotonic() - self._since >= self._max_age_s:
            await self.flush()

    async def latest(self, url: str) -> Capture | None:
        found = self._pending.get(url)
        if found is not None:
            return found
        if (mine := self._mine) is not None:
            h = hash(url)
            if not (
                mine[(h & _MINE_MASK) >> 3] & (1 << (h & 7))
                and mine[((h >> 32) & _MINE_MASK) >> 3] & (1 << ((h >> 32) & 7))
            ):
                return None
        if self._threaded:
            return await asyncio.to_thread(self._index.latest, url)
        return self._index.latest(url)

    def _flush_soon(self) -> None:
        self._timer = None
        task = asyncio.ensure_future(self.flush())
        self._writes.add(task)
        task.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._failure = task.exception()

    async def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rows, self._rows = self._rows, []
        self._since = time.monotonic()
        if not rows:
            return
        if self._threaded:
            await asyncio.to_thread(self._index.add, rows)
        else:
            self._index.add(rows)
        for capture in rows:  # written: the index answers for them now
            if self._pending.get(capture.url) is capture:
                del self._pending[capture.url]

    async def close(self) -> None:
        """Write what is left (after the writes under way) and close the index."""
        if self._timer is not None:
            self._timer.cancel()
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        try:
            await self.flush()
        finally:
            self._index.close()
        if self._failure is not None:
            raise self._failure


class Archive:
    """The crawl's ``ResponseKeeper``: WARC files plus their capture index.

    ``crawl_id`` goes into every record (``X-Crawlfleet-Crawl-Id``), with the request's
    attempt (``X-Crawlfleet-Attempt``, 1 for a first try) and its parser context when it has
    one (``X-Crawlfleet-Context``, JSON), so a reparse sees what the crawl saw. ``side``: the
    keeper of the same archive for robots.txt and sitemap reads.
    """

    def __init__(
        self, files: WarcFiles, index: IndexBatch, *, crawl_id: str, fetch: str = "page"
    ) -> None:
        self._files = files
        self._index = index
        self._crawl_id = crawl_id
        self._fetch = fetch
        self._batch: tuple[list[tuple[FetchResult, Sent]], asyncio.Future[None]] | None = None
        """The pages kept in this turn, and the future their keeps wait for."""
        self._writes: set[asyncio.Task[None]] = set()

    async def keep(self, result: FetchResult, sent: Sent) -> None:
        """Archive ``result``; returns once its records are handed to the OS and its capture
        is on its way to the index (``IndexBatch``), or raises why not (``StateError``).

        The responses kept in one turn of the event loop (17 on average in a bench crawl)
        are written together when it ends, in one batch: digests, records and gzip members
        one after the other and one ``write``; one page at a time between the crawl's other
        work cost 3-7x the same work done alone (decision 0064).
        """
        if self._batch is None:
            self._batch = ([], asyncio.get_running_loop().create_future())
            task = asyncio.ensure_future(self._write_pending())
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        pages, written = self._batch
        pages.append((result, sent))
        await asyncio.shield(written)  # one page's step cancelled: the batch goes on

    async def _write_pending(self) -> None:
        assert self._batch is not None
        (pages, written), self._batch = self._batch, None  # later keeps: the next batch
        try:
            await self._write(pages)
        except asyncio.CancelledError:
            written.cancel()
            raise
        except Exception as exc:  # every page of the batch raises it
            written.set_exception(exc)
        else:
            written.set_result(None)

    async def _write(self, pages: list[tuple[FetchResult, Sent]]) -> None:
        records: list[bytes] = []
        stored: set[int] = set()
        captures = []
        for result, sent in pages:
            url = result.final_url
            status = result.status
            digest = payload_digest(sent.body)
            earlier = await self._index.latest(url) if status in (200, NOT_MODIFIED) else None
            revisit = earlier is not None and (status == NOT_MODIFIED or earlier.digest == digest)
            date = warc_date(result.fetched_at)
            common = self._common(result, sent)
            response_id = record_id()
            records.append(self._request(result, sent, response_id, date, common))
            if revisit:
                assert earlier is not None
                digest = earlier.digest
                records.append(self._revisit(result, earlier, response_id, date, common))
            else:
                if _server_coded(result, sent):
                    stored.add(len(records))
                records.append(self._response(result, sent, digest, response_id, date, common))
            kind = "revisit" if revisit else "response"
            captures.append((url, result.fetched_at, status, digest, kind, result.content_type))
        places = self._files.write(records, stored=stored)
        await self._index.add(
            *(
                Capture(url, at, status, digest, w.file, w.offset, w.length, kind, mime)
                for (url, at, status, digest, kind, mime), w in zip(
                    captures, places[1::2], strict=True
                )
            )
        )

    @property
    def side(self) -> Archive:
        return Archive(self._files, self._index, crawl_id=self._crawl_id, fetch="side")

    async def close(self) -> None:
        if self._writes:
            await asyncio.gather(*self._writes, return_exceptions=True)
        try:
            self._files.close()
        finally:
            await self._index.close()

    def _common(self, result: FetchResult, sent: Sent) -> str:
        """The fields a page's request and response records share (checked by
        ``warc_fields``; the fields each record adds are ours and hold no line break)."""
        fields = [("WARC-Target-URI", result.final_url)]
        if sent.address is not None:
            fields.append(("WARC-IP-Address", sent.address))
        fields.append(("X-Crawlfleet-Crawl-Id", self._crawl_id))
        fields.append((FETCH_HEADER, self._fetch))
        if result.request is not None:
            fields.append(("X-Crawlfleet-Attempt", str(result.request.attempt + 1)))
        return warc_fields(fields)

    def _request(
        self, result: FetchResult, sent: Sent, response_id: str, date: str, common: str
    ) -> bytes:
        host, target = _host_and_target(result.final_url)
        fields = (
            f"{common}Content-Type: application/http; msgtype=request\r\n"
            f"WARC-Concurrent-To: {response_id}\r\n"
        )
        head = http_request_head(sent.method, target, host, sent.request_headers, sent.request_body)
        return warc_record("request", record_id(), date, fields, head)

    def _response(
        self, result: FetchResult, sent: Sent, digest: str, rid: str, date: str, common: str
    ) -> bytes:
        fields = (
            f"{common}Content-Type: application/http; msgtype=response\r\n"
            f"WARC-Payload-Digest: {digest}\r\n"
        )
        if sent.truncated:
            fields += "WARC-Truncated: length\r\n"
        request = result.request
        if request is not None and request.data:  # JSON escapes line breaks
            fields += f"X-Crawlfleet-Context: {orjson.dumps(request.data).decode()}\r\n"
        rendered = result.fetcher == "browser"
        if rendered:
            fields += f"{RENDERED_HEADER}: dom\r\n"
        elif sent.decoded:
            fields += f"{PAYLOAD_HEADER}: decoded\r\n"
        head = http_response_head(result.status, result.headers, recoded=rendered or sent.decoded)
        return warc_record("response", rid, date, fields, head, sent.body)

    def _revisit(
        self, result: FetchResult, earlier: Capture, rid: str, date: str, common: str
    ) -> bytes:
        fields = common + warc_fields(
            [
                ("Content-Type", "application/http; msgtype=response"),
                ("WARC-Profile", REVISIT_PROFILE),
                ("WARC-Payload-Digest", earlier.digest),
                ("WARC-Refers-To-Target-URI", earlier.url),
                ("WARC-Refers-To-Date", warc_date(earlier.at)),
            ]
        )
        head = http_response_head(result.status, result.headers)
        return warc_record("revisit", rid, date, fields, head)
