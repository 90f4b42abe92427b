"""``IndexBatch``: captures are found before and after they are written; an index that only
this batch writes (``alone``) is not asked about URLs it never got, and is when it had
captures before."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from crawlfleet.archive.index import SqliteCaptureIndex
from crawlfleet.archive.keeper import IndexBatch
from crawlfleet.archive.protocols import Capture


def capture(url: str, at: float, digest: str = "sha1:A", kind: str = "response") -> Capture:
    return Capture(url, at, 200, digest, "a.warc.gz", int(at) * 100, 90, kind, "text/html")


class Counting(SqliteCaptureIndex):
    asked = 0

    def latest(self, url: str) -> Capture | None:
        self.asked += 1
        return super().latest(url)


def test_a_first_crawls_batch_asks_the_index_only_about_urls_it_added(tmp_path: Path) -> None:
    async def run() -> None:
        index = Counting(tmp_path / "a.sqlite")
        batch = IndexBatch(index, max_rows=2, alone=True)
        first = capture("http://a.test/1", 1.0)
        await batch.add(first)
        assert await batch.latest("http://a.test/1") == first  # pending: not asked
        await batch.add(capture("http://a.test/2", 2.0, kind="revisit"))  # written: 2 rows
        assert await batch.latest("http://a.test/1") == first  # in the index: asked
        assert index.asked == 1
        for n in range(3, 1000):
            assert await batch.latest(f"http://a.test/{n}") is None
        assert await batch.latest("http://a.test/2") is None  # only a revisit
        assert index.asked < 5  # the filter's false positives, if any
        await batch.close()

    asyncio.run(run())


def test_an_index_with_earlier_captures_is_asked_about_every_url(tmp_path: Path) -> None:
    async def run() -> None:
        earlier = SqliteCaptureIndex(tmp_path / "a.sqlite")
        earlier.add([capture("http://a.test/1", 1.0)])
        earlier.close()
        index = Counting(tmp_path / "a.sqlite")
        batch = IndexBatch(index, alone=True)
        assert await batch.latest("http://a.test/1") == capture("http://a.test/1", 1.0)
        assert await batch.latest("http://a.test/2") is None
        assert index.asked == 2
        await batch.close()

    asyncio.run(run())


def test_captures_added_together_are_written_in_one_call(tmp_path: Path) -> None:
    calls: list[int] = []

    class Recording(SqliteCaptureIndex):
        def add(self, captures: Sequence[Capture]) -> None:
            calls.append(len(captures))
            super().add(captures)

    async def run() -> None:
        batch = IndexBatch(Recording(tmp_path / "a.sqlite"), max_rows=1)
        await batch.add(*(capture(f"http://a.test/{n}", float(n)) for n in range(5)))
        await batch.add(capture("http://a.test/9", 9.0))
        await batch.close()

    asyncio.run(run())
    assert calls == [5, 1]
    assert len(SqliteCaptureIndex(tmp_path / "a.sqlite").find()) == 6
