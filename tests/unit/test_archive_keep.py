"""``Archive.keep``: the responses kept in one turn of the event loop are written in one batch
(one ``write``), each keep returns once its records are in the file, every capture points at
its own record, and a batch that cannot be written fails every keep of it."""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path

from crawlfleet.archive.index import SqliteCaptureIndex
from crawlfleet.archive.keeper import Archive, IndexBatch
from crawlfleet.archive.protocols import Sent
from crawlfleet.archive.reading import read_capture
from crawlfleet.archive.warc import WarcFiles, Written
from crawlfleet.models import CrawlRequest, FetchResult


class CountingFiles(WarcFiles):
    writes: list[int]

    def write(
        self, records: Sequence[bytes], *, stored: AbstractSet[int] = frozenset()
    ) -> list[Written]:
        self.writes = [*getattr(self, "writes", []), len(records)]
        return super().write(records, stored=stored)


def page(n: int, *, coded: bool = False) -> tuple[FetchResult, Sent]:
    url = f"http://a.test/{n}"
    html = f"<html><body><p>page {n}</p></body></html>".encode() * 20
    body = gzip.compress(html) if coded else html
    headers = {"content-type": "text/html"} | ({"content-encoding": "gzip"} if coded else {})
    request = CrawlRequest(url=url, fingerprint=str(n), domain="a.test")
    result = FetchResult(
        url, url, 200, headers, html, 0.01, fetched_at=time.time(), request=request
    )
    return result, Sent("GET", {"User-Agent": "t"}, None, body)


def test_the_keeps_of_one_turn_are_one_write_and_each_capture_is_its_own(tmp_path: Path) -> None:
    files = CountingFiles(tmp_path / "warc", crawl_id="c1")
    index = SqliteCaptureIndex(tmp_path / "a.sqlite")
    archive = Archive(files, IndexBatch(index, alone=True), crawl_id="c1")
    pages = [page(n, coded=n % 2 == 1) for n in range(6)]

    async def run() -> None:
        await asyncio.gather(*(archive.keep(result, sent) for result, sent in pages))
        await asyncio.gather(*(archive.keep(result, sent) for result, sent in [page(9)]))
        await archive.close()

    asyncio.run(run())
    assert files.writes == [12, 1, 2]  # six pages (the warcinfo as the file opens), one page
    reader = SqliteCaptureIndex(tmp_path / "a.sqlite")
    for result, sent in [*pages, page(9)]:
        [capture] = reader.find(result.final_url)
        archived = read_capture(str(tmp_path / "warc"), capture)
        assert archived.url == result.final_url
        assert archived.body == sent.body


FULL_DISK_SCRIPT = """
import asyncio, random, resource, signal, sys, time
from pathlib import Path
from crawlfleet.archive.index import SqliteCaptureIndex
from crawlfleet.archive.keeper import Archive, IndexBatch
from crawlfleet.archive.protocols import Sent
from crawlfleet.archive.warc import WarcFiles
from crawlfleet.errors import StateError
from crawlfleet.models import CrawlRequest, FetchResult

async def keep(archive, n):
    url = f"http://a.test/{n}"
    request = CrawlRequest(url=url, fingerprint=str(n), domain="a.test")
    body = random.Random(n).randbytes(3000)  # does not compress: the batch passes the limit
    result = FetchResult(url, url, 200, {}, body, 0.01, fetched_at=time.time(), request=request)
    try:
        await archive.keep(result, Sent("GET", {}, None, body))
    except StateError as exc:
        return str(exc)
    return "kept"

async def main(root):
    index = SqliteCaptureIndex(Path(root) / "a.sqlite")  # before the limit
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    archive = Archive(WarcFiles(Path(root) / "warc", crawl_id="c1"), IndexBatch(index), crawl_id="c1")
    print(await keep(archive, 0))
    for outcome in await asyncio.gather(*(keep(archive, n) for n in range(1, 5))):
        print(outcome)

asyncio.run(main(sys.argv[1]))
"""


def test_a_batch_that_cannot_be_written_fails_every_keep_of_it(tmp_path: Path) -> None:
    # The file size limit (RLIMIT_FSIZE) is per process: a child process plays the full disk.
    done = subprocess.run(
        [sys.executable, "-c", FULL_DISK_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, *batch = done.stdout.splitlines()
    assert first == "kept", done.stderr
    assert len(batch) == 4
    assert all(line.startswith("cannot write the archive file") for line in batch), batch
