"""``archive.warc.WarcFiles``: files rolled at a size, never shared, each opened by a warcinfo."""

from __future__ import annotations

import io
import random
import time
from pathlib import Path

from fastwarc.warc import WarcRecord, WarcRecordType
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.archive.warc import WarcFiles, new_record


def payload(n: int, size_bytes: int) -> bytes:
    return random.Random(n).randbytes(size_bytes)  # incompressible: the file grows by it


def resource(n: int, size_bytes: int) -> WarcRecord:
    record = new_record(WarcRecordType.resource, time.time())
    record.headers["WARC-Target-URI"] = f"http://a.test/{n}"
    record.set_bytes_content(payload(n, size_bytes))
    return record


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
