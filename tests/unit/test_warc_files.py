"""``archive.warc.WarcFiles``: files rolled at a size, never shared, each opened by a warcinfo."""

from __future__ import annotations

import gzip
import io
import random
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.archive.warc import (
    WarcFiles,
    record_id,
    stored_member,
    warc_date,
    warc_fields,
    warc_record,
)


def payload(n: int, size_bytes: int) -> bytes:
    return random.Random(n).randbytes(size_bytes)  # incompressible: the file grows by it


def resource(n: int, size_bytes: int) -> bytes:
    fields = warc_fields([("WARC-Target-URI", f"http://a.test/{n}")])
    return warc_record(
        "resource", record_id(), warc_date(time.time()), fields, payload(n, size_bytes)
    )


def test_files_roll_past_their_size_and_every_record_is_where_it_was_said(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, crawl_id="c1", max_file_bytes=3_000)
    places = [files.write([resource(n, 2_000)])[0] for n in range(7)]
    files.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == len(set(place.file for place in places)) >= 2
    assert all(name.startswith("c1-") and name.endswith(".warc.gz") for name in names)
    assert [p.name for p in files.closed_files] == names
    for n, place in enumerate(places):
        with (tmp_path / place.file).open("rb") as handle:
            handle.seek(place.offset)
            member = handle.read(place.length)
        read = [
            (r.rec_headers["WARC-Target-URI"], r.content_stream().read())
            for r in ArchiveIterator(io.BytesIO(member))
        ]
        assert read == [(f"http://a.test/{n}", payload(n, 2_000))]
    for name in names:
        with (tmp_path / name).open("rb") as handle:
            first = next(iter(ArchiveIterator(handle)))
        assert first.rec_type == "warcinfo"
        assert first.rec_headers["WARC-Filename"] == name


def test_two_writers_in_one_directory_never_share_a_file(tmp_path: Path) -> None:
    a = WarcFiles(tmp_path, crawl_id="c1")
    b = WarcFiles(tmp_path, crawl_id="c1")
    [pa] = a.write([resource(1, 10)])
    [pb] = b.write([resource(2, 10)])
    a.close()
    b.close()
    assert pa.file != pb.file


def test_a_record_built_here_reads_back_in_warcio_with_its_fields_and_block() -> None:
    fields = warc_fields(
        [("WARC-Target-URI", "http://a.test/é?q=1"), ("X-Crawlfleet-Fetch", "page")]
    )
    record = warc_record("resource", record_id(), warc_date(1_700_000_000.25), fields, b"AB", b"CD")
    read = next(iter(ArchiveIterator(io.BytesIO(record))))
    assert read.rec_type == "resource"
    assert read.rec_headers["WARC-Target-URI"] == "http://a.test/é?q=1"
    assert read.rec_headers["WARC-Date"] == "2023-11-14T22:13:20.250000Z"
    assert read.rec_headers["WARC-Record-ID"].startswith("<urn:uuid:")
    assert read.rec_headers["Content-Length"] == "4"
    assert read.content_stream().read() == b"ABCD"


def test_a_field_value_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        warc_fields([("WARC-Target-URI", "http://a.test/\r\nWARC-Type: resource")])


@pytest.mark.parametrize("size_bytes", [0, 1, 65_535, 65_536, 200_000])
def test_a_stored_member_is_one_gzip_member_of_uncompressed_blocks(size_bytes: int) -> None:
    data = payload(size_bytes, size_bytes)
    member = stored_member(data)
    assert gzip.decompress(member) == data
    assert member[10] >> 1 & 3 == 0  # the first block's type: stored
    blocks = max(1, -(-size_bytes // 65_535))
    assert len(member) == 10 + 5 * blocks + size_bytes + 8


def test_records_written_stored_read_back_in_warcio_next_to_deflated_ones(tmp_path: Path) -> None:
    files = WarcFiles(tmp_path, crawl_id="c1")
    records = [resource(n, 70_000) for n in range(3)]
    places = files.write(records, stored=(1,))
    files.close()
    [path] = tmp_path.iterdir()
    kinds = []
    with path.open("rb") as handle:
        for place in places:
            handle.seek(place.offset)
            member = handle.read(place.length)
            kinds.append(member[10] >> 1 & 3)
            read = [r.content_stream().read() for r in ArchiveIterator(io.BytesIO(member))]
            assert read == [payload(len(kinds) - 1, 70_000)]
    assert [kind == 0 for kind in kinds] == [False, True, False]
    with path.open("rb") as handle:
        uris = [r.rec_headers["WARC-Target-URI"] for r in ArchiveIterator(handle)][1:]
    assert uris == [f"http://a.test/{n}" for n in range(3)]
