"""A distributed reparse: two workers archive a crawl to an S3 API on loopback (moto), then
``crawlfleet reparse --redis ...`` fans out one task per WARC object to the workers, which
write the items into PostgreSQL under another crawl id: the same items as the crawl's, and
again the same when run twice (upserts), with no request to the site."""

from __future__ import annotations

import contextlib
import io
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import orjson
import psycopg
import redis
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import FAST, KillAt, Workers, crawl_done, dispatch, start_dispatch
from tests.e2e.test_archive_s3 import BUCKET, objects, s3
from tests.e2e.test_distributed_faults import SHORT_LEASE
from tests.fixtures.redis_server import RedisServer

__all__ = ["s3"]  # the fixture, used by name

runner = CliRunner(env={"COLUMNS": "300"})


def items_of(dsn: str, crawl_id: str) -> dict[tuple[str, str], bytes]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT item_type, item_key, data::text FROM items WHERE crawl_id = %s", (crawl_id,)
        )
        return {(kind, key): orjson.dumps(orjson.loads(data)) for kind, key, data in rows}


def test_a_distributed_reparse_of_an_s3_archive_gives_the_crawls_items(
    s3: str,
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
) -> None:
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)  # AWS_* from the s3 fixture
    archive = f"s3://{BUCKET}/fleet"
    crawl = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "s3arch"]
    result = dispatch(site.url("quotes"), *crawl, *FAST, "--archive", archive)
    assert result.returncode == 0, result.stdout
    for worker in list(workers.started):
        assert worker.terminate() == 0  # a worker uploads its open file as it stops
    files = objects("fleet/")
    assert files  # a file a worker that fetched (one worker may have fetched every page)
    crawled = items_of(postgres_dsn, "s3arch")
    assert crawled
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    site.clear_log()
    out = tmp_path / "re.jsonl"
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "s3again"]
    for _ in range(2):  # a second run upserts the same items
        again = runner.invoke(app, ["reparse", "--archive", archive, *target, "-o", str(out)])
        assert again.exit_code == 0, again.output
        assert f"{len(files)} WARC files, one task each" in again.output
        got = items_of(postgres_dsn, "s3again")
        differ = [(got.get(k), v) for k, v in crawled.items() if got.get(k) != v]
        assert got == crawled, differ[:2]
        exported = [orjson.loads(line) for line in out.read_bytes().splitlines()]
        assert {(o["type"], o["key"]) for o in exported} == set(crawled)
    assert site.log == []  # no request made
    logs = "".join(worker.log() for worker in workers.started)
    assert "crawlfleet.reparse_file" in logs
    with redis.Redis.from_url(redis_url) as client:
        assert client.keys("crawlfleet:s3again:reparse:*") == []  # the job's keys are gone


def test_a_file_a_worker_cannot_reparse_fails_the_command_with_its_name(
    s3: str, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    workers.start(redis_url, postgres_dsn, concurrency=2)
    archive = tmp_path / "warc"
    archive.mkdir()
    (archive / "broken.warc.gz").write_bytes(b"not a WARC file")
    result = runner.invoke(
        app,
        [
            "reparse", "--archive", str(archive), "--redis", redis_url, "--postgres",
            postgres_dsn, "--crawl-id", "broken", "--parsers", str(tmp_path / "p.py"),
            "-o", str(tmp_path / "out.jsonl"),
        ],
    )  # fmt: skip
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert "1 of 1 WARC files not reparsed; broken.warc.gz:" in message
    assert "was not started to allow" in message  # the worker refused the parser module


def test_a_worker_killed_mid_crawl_loses_no_reported_capture_and_the_reparse_matches(
    s3: str,
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    tmp_path: Path,
) -> None:
    """The issue's fault: one of two workers archiving to S3 is SIGKILLed mid-crawl; its
    replacement (same host) uploads the dead worker's spool as it joins the crawl."""
    fault = KillAt(workers, redis_url, postgres_dsn, [10])
    workers.start(redis_url, postgres_dsn, concurrency=4)
    archive = f"s3://{BUCKET}/killed"
    crawl = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "s3kill"]
    proc = start_dispatch(
        site.url("quotes"),
        *crawl,
        *FAST,
        "--archive",
        archive,
        log_path=tmp_path / "dispatch.log",
        env=SHORT_LEASE,
    )
    deadline = time.monotonic() + 90
    while proc.poll() is None and time.monotonic() < deadline:
        fault(crawl_done(redis_url, "s3kill"))
        time.sleep(0.05)
    assert proc.wait(10) == 0, (tmp_path / "dispatch.log").read_text()
    assert fault.kills == 1
    killed = workers.started[0].process
    assert killed is not None
    for worker in workers.started:
        if worker.process is not None and worker.process.poll() is None:
            assert worker.terminate() == 0
    stored = objects("killed/")
    archived: set[str] = set()
    for data in stored.values():
        with contextlib.suppress(ArchiveLoadFailed, EOFError, OSError, zlib.error):
            for record in ArchiveIterator(io.BytesIO(data)):  # a cut last record ends a file
                if record.rec_type in ("response", "revisit"):
                    archived.add(record.rec_headers["WARC-Target-URI"])
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT url FROM attempts WHERE crawl_id = 's3kill' AND status IS NOT NULL"
        )
        reported = {url for (url,) in rows}
        by_killed = conn.execute(
            "SELECT count(*) FROM attempts WHERE crawl_id = 's3kill' AND worker LIKE %s",
            (f"%:{killed.pid}",),
        ).fetchone()
    assert reported
    if by_killed and by_killed[0]:  # it fetched before it died: its file was uploaded
        assert any(f"-{killed.pid}-" in name for name in stored)
    assert reported <= archived  # the dead worker's reported captures were uploaded too
    crawled = items_of(postgres_dsn, "s3kill")
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4)
    target = ["--redis", redis_url, "--postgres", postgres_dsn, "--crawl-id", "s3kill-re"]
    out = tmp_path / "re.jsonl"
    again = runner.invoke(app, ["reparse", "--archive", archive, *target, "-o", str(out)])
    assert again.exit_code == 0, again.output
    # The same items; a page captured twice (its lease had not ended when the worker died)
    # may keep the other capture's fetch time.
    assert set(items_of(postgres_dsn, "s3kill-re")) == set(crawled)


def test_a_distributed_reparse_no_worker_takes_stops_with_the_reason(
    start_redis: Callable[..., RedisServer], postgres_dsn: str, tmp_path: Path
) -> None:
    """No worker runs: after ``worker_wait_s`` the command says why in one line, exits 2 and
    voids its tasks (their definition is gone)."""
    redis_url = start_redis().url  # its own server: the tasks left queued go with it
    archive = tmp_path / "warc"
    archive.mkdir()
    (archive / "a.warc.gz").write_bytes(b"never read")
    started = time.monotonic()
    result = CliRunner(env={"COLUMNS": "300", "CRAWLFLEET_WORKER_WAIT_S": "1.5"}).invoke(
        app,
        [
            "reparse", "--archive", str(archive), "--redis", redis_url, "--postgres",
            postgres_dsn, "--crawl-id", "nobody", "-o", str(tmp_path / "out.jsonl"),
        ],
    )  # fmt: skip
    took_s = time.monotonic() - started
    assert result.exit_code == 2, result.output
    assert 1.5 <= took_s < 15
    [line] = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "no live worker has taken the reparse's tasks for 1.5 s" in line
    assert "no worker sent a heartbeat" in line
    assert "--wait-for-workers" in line
    assert redis.Redis.from_url(redis_url).keys("*reparse*definition*") == []
