"""The ``CaptureIndex`` contract, over its two implementations: SQLite (embedded) and
PostgreSQL (distributed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlfleet.archive.index import SqliteCaptureIndex
from crawlfleet.archive.protocols import Capture, CaptureIndex


@pytest.fixture(params=["sqlite", "postgres"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CaptureIndex]:
    if request.param == "sqlite":
        found: CaptureIndex = SqliteCaptureIndex(tmp_path / "archive.sqlite")
    else:
        from crawlfleet.archive.postgres_index import PostgresCaptureIndex

        found = PostgresCaptureIndex(request.getfixturevalue("postgres_dsn"), "c1")
    yield found
    found.close()


def capture(
    url: str, at: float, digest: str, file: str = "a.warc.gz", kind: str = "response"
) -> Capture:
    return Capture(url, at, 200, digest, file, int(at) * 100, 90, kind, "text/html")


def test_latest_is_the_newest_full_capture_of_the_url(index: CaptureIndex) -> None:
    assert index.latest("http://a.test/") is None
    index.add([capture("http://a.test/", 1.0, "sha1:A"), capture("http://a.test/", 3.0, "sha1:B")])
    index.add([capture("http://a.test/", 5.0, "sha1:B", kind="revisit")])
    index.add([capture("http://b.test/", 9.0, "sha1:C")])
    assert index.latest("http://a.test/") == capture("http://a.test/", 3.0, "sha1:B")


def test_find_lists_by_url_then_time_and_forget_drops_a_files_rows(index: CaptureIndex) -> None:
    rows = [
        capture("http://b.test/", 2.0, "sha1:B", "b.warc.gz"),
        capture("http://a.test/", 4.0, "sha1:A2", "b.warc.gz"),
        capture("http://a.test/", 1.0, "sha1:A1"),
    ]
    index.add(rows)
    assert index.find() == [rows[2], rows[1], rows[0]]
    assert index.find("http://a.test/") == [rows[2], rows[1]]
    assert index.find(limit=1) == [rows[2]]
    assert index.forget_files(["b.warc.gz"]) == 2
    assert index.find() == [rows[2]]


def test_the_root_is_kept(index: CaptureIndex) -> None:
    assert index.root is None
    index.set_root("s3://bucket/prefix")
    index.set_root("/srv/warc")
    assert index.root == "/srv/warc"
