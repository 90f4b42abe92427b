"""``--archive DIR`` in the distributed runtime: two Celery workers write their own WARC files
into one directory and their captures into PostgreSQL; a reparse gives the crawl's items."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import FAST, Workers, dispatch, postgres_items
from tests.e2e.test_archive import sent_by


def test_two_workers_archive_and_index_every_response_and_a_reparse_gives_the_items(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    archive = tmp_path / "warc"
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    seed = site.url("quotes")
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "arch"]
    result = dispatch(seed, *target, *FAST, "--archive", str(archive))
    assert result.returncode == 0, result.stdout
    files = sorted(archive.glob("*.warc.gz"))
    assert files  # one series a worker process that fetched (named by its host and pid)
    responses, revisits = [], 0
    for path in files:
        for record in ArchiveIterator(io.BytesIO(path.read_bytes()), check_digests="raise"):
            revisits += record.rec_type == "revisit"  # robots.txt read again by a 2nd worker
            if record.rec_type == "response":
                url = record.rec_headers["WARC-Target-URI"]
                responses.append((url, record.content_stream().read()))
    pages = [url for url, _ in responses if not url.endswith("/robots.txt")]
    assert sorted(pages) == sorted(
        seed.rstrip("/") + r.path for r in site.log if r.path != "/robots.txt"
    )
    # The dispatcher's own robots.txt read, before it seeds the crawl, is not archived.
    assert 1 <= len(responses) - len(pages) < sum(r.path == "/robots.txt" for r in site.log) + 1
    assert dict(responses)[seed] == sent_by(seed)
    runner = CliRunner(env={"COLUMNS": "300"})
    index = ["--postgres", postgres_dsn, "--crawl-id", "arch"]
    cdxj = runner.invoke(app, ["archive", "cdxj", *index])
    assert cdxj.exit_code == 0, cdxj.output
    assert cdxj.stdout.count("\n") == len(responses) + revisits
    got = runner.invoke(app, ["archive", "get", seed, *index])
    assert got.exit_code == 0, got.output
    assert got.stdout.encode() == sent_by(seed)
    site.clear_log()
    out = tmp_path / "re.jsonl"
    again = runner.invoke(app, ["reparse", "--archive", str(archive), "-o", str(out)])
    assert again.exit_code == 0, again.output
    assert site.log == []
    reparsed = {(o["type"], o["key"]) for o in map(orjson.loads, out.read_bytes().splitlines())}
    assert reparsed == postgres_items(postgres_dsn)
