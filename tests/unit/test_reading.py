"""``archive.reading.read_file``: a file's last record, which a killed writer may have cut,
comes as ``damaged`` when its payload fails its digest; a member damaged before it fails
its gzip check (an error, never a page parsed from wrong bytes)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from crawlfleet.archive.reading import DAMAGED, read_file
from crawlfleet.archive.warc import (
    WarcFiles,
    Written,
    payload_digest,
    record_id,
    warc_date,
    warc_fields,
    warc_record,
)


def body(n: int) -> bytes:
    return b"<html>" + random.Random(n).randbytes(3_000)


def archive(tmp_path: Path, pages: int) -> tuple[Path, list[Written]]:
    files = WarcFiles(tmp_path, crawl_id="c1")
    places = []
    for n in range(pages):
        fields = warc_fields(
            [
                ("WARC-Target-URI", f"http://a.test/{n}"),
                ("Content-Type", "application/http; msgtype=response"),
                ("WARC-Payload-Digest", payload_digest(body(n))),
            ]
        )
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
        record = warc_record("response", record_id(), warc_date(1.0), fields, head, body(n))
        places += files.write([record])
    files.close()
    return files.closed_files[0], places


def test_a_cut_last_record_is_damaged_and_the_others_are_read(tmp_path: Path) -> None:
    path, places = archive(tmp_path, 3)
    path.write_bytes(path.read_bytes()[: places[2].offset + places[2].length // 2])
    read = [(a.url, a.kind, a.body) for a in read_file(path)]
    assert read[:2] == [(f"http://a.test/{n}", "response", body(n)) for n in range(2)]
    assert [(url, kind) for url, kind, _ in read[2:]] == [("http://a.test/2", DAMAGED)]


def test_a_whole_file_is_read_with_every_payload(tmp_path: Path) -> None:
    path, _ = archive(tmp_path, 3)
    assert [(a.kind, a.body) for a in read_file(path)] == [("response", body(n)) for n in range(3)]


def test_a_member_damaged_before_the_last_is_an_error(tmp_path: Path) -> None:
    path, places = archive(tmp_path, 3)
    data = bytearray(path.read_bytes())
    data[places[1].offset + places[1].length // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(OSError, match="decompression error"):
        list(read_file(path))
