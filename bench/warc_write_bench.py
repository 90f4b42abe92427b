"""How long writing one gzipped WARC response record takes: warcio against fastwarc.

Each record: a request-less ``response`` of an HTML page of ``--page-bytes`` with a SHA-1
payload digest, gzip per record, into one file. Prints µs a record (best of ``--runs``).
Run: ``python bench/warc_write_bench.py --records 2000``.
"""

from __future__ import annotations

import argparse
import io
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

HEADERS = [("Content-Type", "text/html; charset=utf-8"), ("Server", "bench")]


def page(size_bytes: int, seed: int) -> bytes:
    rnd = os.urandom(16).hex()
    words = b" ".join(b"word%d" % ((seed * 7 + i) % 5000) for i in range(size_bytes // 8))
    return (b"<html><body><p>" + rnd.encode() + words)[:size_bytes] + b"</p></body></html>"


def with_warcio(path: Path, pages: list[bytes]) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
        for n, body in enumerate(pages):
            head = StatusAndHeaders(
                "200 OK", [*HEADERS, ("Content-Length", str(len(body)))], protocol="HTTP/1.1"
            )
            record = writer.create_warc_record(
                f"http://example.test/{n}",
                "response",
                payload=io.BytesIO(body),
                length=len(body),
                http_headers=head,
            )
            writer.write_record(record)


def with_fastwarc(path: Path, pages: list[bytes]) -> None:
    from fastwarc.stream_io import GzipWriter
    from fastwarc.warc import WarcRecord, WarcRecordType

    with path.open("wb") as out:
        for n, body in enumerate(pages):
            http = b"HTTP/1.1 200 OK\r\n" + b"".join(f"{k}: {v}\r\n".encode() for k, v in HEADERS)
            http += b"Content-Length: %d\r\n\r\n" % len(body)
            record = WarcRecord()
            record.init_headers(WarcRecordType.response, str(uuid.uuid4()).encode())
            record.headers["WARC-Target-URI"] = f"http://example.test/{n}"
            record.headers["Content-Type"] = "application/http; msgtype=response"
            record.set_bytes_content(http + body)
            gz = GzipWriter(out)  # one gzip member a record
            record.write(gz, checksum_data=True)
            gz.finish()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--page-bytes", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pages = [page(args.page_bytes, n) for n in range(args.records)]
    writers: dict[str, Callable[[Path, list[bytes]], None]] = {
        "warcio": with_warcio,
        "fastwarc": with_fastwarc,
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, write in writers.items():
            best = float("inf")
            for run in range(args.runs):
                path = Path(tmp, f"{name}-{run}.warc.gz")
                started = time.process_time()
                write(path, pages)
                best = min(best, time.process_time() - started)
                size = path.stat().st_size
            print(
                f"{name:9} {best / args.records * 1e6:8.1f} µs CPU a record "
                f"({args.records} records of {args.page_bytes} B, file {size / 1e6:.1f} MB)"
            )


if __name__ == "__main__":
    main()
