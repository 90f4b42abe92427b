"""CPU a page of ``Archive.keep`` (request + response record, digest, gzip, index row) over the
bench site's product pages, outside any crawl.

    .venv/bin/python bench/crawl_bench.py --tools crawlfleet --pages 4000 --runs 1 --no-results
    PYTHONPATH=src .venv/bin/python bench/archive_keep_bench.py --runs 7

The first command generates the site (``bench/_work/site``). Prints µs of CPU a page per run
and the best (decision 0049).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import tempfile
import time
from pathlib import Path

from crawlfleet.archive.index import SqliteCaptureIndex
from crawlfleet.archive.keeper import Archive, IndexBatch
from crawlfleet.archive.protocols import Sent
from crawlfleet.archive.warc import WarcFiles
from crawlfleet.models import CrawlRequest, FetchResult

SITE = Path(__file__).resolve().parent / "_work" / "site"
HEADERS = {  # nginx's, as the bench crawl gets them
    "server": "nginx/1.22.1",
    "date": "Fri, 04 Dec 2026 17:00:00 GMT",
    "content-type": "text/html",
    "content-length": "21000",
    "last-modified": "Fri, 04 Dec 2026 16:00:00 GMT",
    "connection": "keep-alive",
    "etag": '"693139d0-5208"',
    "accept-ranges": "bytes",
}
SENT_HEADERS = {
    "User-Agent": "crawlfleet/0.1 (+https://example.test)",
    "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
    "Accept-Encoding": "gzip, deflate, br, zstd",
    "Accept-Language": "en",
}


async def one_run(pages: list[tuple[str, bytes]], work: Path, headers: dict[str, str]) -> float:
    """µs of CPU a page to keep ``pages`` (sent with ``headers``) in a fresh archive under
    ``work`` (empty)."""
    files = WarcFiles(work / "warc", crawl_id="bench")
    archive = Archive(
        files, IndexBatch(SqliteCaptureIndex(work / "a.sqlite"), alone=True), crawl_id="bench"
    )
    fetched = []
    for n, (url, body) in enumerate(pages):
        request = CrawlRequest(url=url, fingerprint=str(n), domain="bench")
        result = FetchResult(
            url, url, 200, headers, body, 0.001, fetched_at=time.time(), request=request
        )
        fetched.append((result, Sent("GET", SENT_HEADERS, None, body, address="127.0.0.12")))
    started = time.process_time()
    for result, sent in fetched:
        await archive.keep(result, sent)
    await archive.close()
    return (time.process_time() - started) / len(fetched) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--gzip", action="store_true", help="the pages as sent gzip-compressed (level 1)"
    )
    args = parser.parse_args()
    paths = sorted(SITE.glob("*/p/*.html"))[: args.pages]
    if not paths:
        raise SystemExit(f"no product pages under {SITE}: run bench/crawl_bench.py first")
    pages = [(f"http://{p.parent.parent.name}/p/{p.name}", p.read_bytes()) for p in paths]
    headers = dict(HEADERS)
    if args.gzip:
        pages = [(url, gzip.compress(body, 1)) for url, body in pages]
        del headers["content-length"]
        headers["content-encoding"] = "gzip"
    mean_kb = sum(len(body) for _, body in pages) / len(pages) / 1000
    with tempfile.TemporaryDirectory(prefix="keep-bench-") as tmp:
        runs = []
        for run in range(args.runs):
            work = Path(tmp) / str(run)
            work.mkdir()
            runs.append(asyncio.run(one_run(pages, work, headers)))
    print(
        f"Archive.keep, {len(pages)} pages of {mean_kb:.1f} KB{' as gzip' if args.gzip else ''}: "
        + " ".join(f"{r:.0f}" for r in runs)
        + f" µs of CPU a page; best {min(runs):.0f}"
    )


if __name__ == "__main__":
    main()
