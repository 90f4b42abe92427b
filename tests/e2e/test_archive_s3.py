"""``--archive s3://bucket/prefix``: WARC files spooled, uploaded (multipart past 8 MiB) to an
S3 API on loopback (moto's server, through the same boto3 client a user points at AWS or
MinIO), found through the index and reparsed from the bucket."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from crawlfleet.archive.s3 import PART_BYTES, S3Archive, S3Location
from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.runtime.archiving import open_archive
from crawlfleet.settings.loading import load_settings
from tests.e2e.test_archive import EXAMPLES, sent_by
from tests.fixtures.redis_server import free_port

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]
MOTO_SERVER = Path(shutil.which("moto_server") or Path(os.__file__).parents[3] / "bin/moto_server")
BUCKET = "crawls"


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A private moto S3 server on 127.0.0.1 with the bucket ``crawls``; its endpoint and
    throwaway credentials in the environment, as a user would give them."""
    port = free_port()
    log = (tmp_path / "moto.log").open("wb")
    server = subprocess.Popen(
        [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        for name, value in {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing-key",
            "AWS_SECRET_ACCESS_KEY": "testing-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
        }.items():
            monkeypatch.setenv(name, value)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def objects(prefix: str) -> dict[str, bytes]:
    client = boto3.client("s3")
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listed}


def test_a_crawl_archives_to_s3_and_is_found_and_reparsed_from_it(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    example = EXAMPLES / "aisles"
    config = ["--config", str(example / "crawl.toml"), "--parsers", str(example / "parsers.py")]
    state, crawled = tmp_path / "state", tmp_path / "crawl.jsonl"
    target = f"s3://{BUCKET}/shop/run-1"
    seed = site.url("shop", "/aisles/")
    result = runner.invoke(
        app,
        [
            "crawl",
            seed,
            *config,
            *FAST,
            "--state",
            str(state),
            "--archive",
            target,
            "-o",
            str(crawled),
        ],
    )
    assert result.exit_code == 0, result.output
    stored = objects("shop/run-1/")
    assert stored
    assert all(key.endswith(".warc.gz") for key in stored)
    assert list((state / "archive-spool").iterdir()) == []  # every file uploaded, then removed
    responses = []
    for data in stored.values():
        for record in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
            if record.rec_type == "response":
                url = record.rec_headers["WARC-Target-URI"]
                responses.append((url, record.content_stream().read()))
    assert len(responses) == len(site.log)
    assert dict(responses)[seed] == sent_by(seed)
    site.clear_log()
    got = runner.invoke(app, ["archive", "get", seed, "--state", str(state)])
    assert got.exit_code == 0, got.output
    assert got.stdout.encode() == sent_by(seed)
    site.clear_log()
    reparsed = tmp_path / "re.jsonl"
    again = runner.invoke(app, ["reparse", "--archive", target, *config, "-o", str(reparsed)])
    assert again.exit_code == 0, again.output
    assert site.log == []
    assert reparsed.read_bytes() == crawled.read_bytes()
    assert "testing-secret" not in result.output + got.output + again.output


def test_a_file_past_the_part_size_goes_up_in_parts(s3: str, tmp_path: Path) -> None:
    big = tmp_path / "big.warc.gz"
    big.write_bytes(os.urandom(PART_BYTES + 1024 * 1024))
    archive = S3Archive(S3Location.parse(f"s3://{BUCKET}/parts"))
    archive.upload(big, big.name)
    head = boto3.client("s3").head_object(Bucket=BUCKET, Key="parts/big.warc.gz")
    assert head["ContentLength"] == big.stat().st_size
    assert head["ETag"].strip('"').endswith("-2")  # a multipart upload's ETag: 2 parts
    assert archive.read_range("big.warc.gz", 100, 50) == big.read_bytes()[100:150]


def test_files_a_killed_crawl_left_in_the_spool_are_uploaded_by_the_next(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    spool = state / "archive-spool"
    spool.mkdir(parents=True)
    left = spool / "default-20260101000000-host-1-00000.warc.gz"
    left.write_bytes(b"")  # what a process killed before its first record leaves
    target = f"s3://{BUCKET}/resumed"
    result = runner.invoke(
        app,
        [
            "crawl",
            site.url("lab", "/page/1"),
            *FAST,
            "--max-depth",
            "0",
            "--state",
            str(state),
            "--archive",
            target,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "resumed/" + left.name in objects("resumed/")
    assert not left.exists()


def test_an_unreachable_bucket_fails_the_crawl_and_keeps_the_files(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    result = runner.invoke(
        app,
        [
            "crawl",
            site.url("lab", "/page/1"),
            *FAST,
            "--max-depth",
            "0",
            "--state",
            str(state),
            "--archive",
            "s3://no-such-bucket/x",
        ],
    )
    assert result.exit_code != 0
    assert "not uploaded" in result.output
    assert "NoSuchBucket" in result.output
    assert list((state / "archive-spool").glob("*.warc.gz"))


def test_prune_removes_the_bucket_objects(s3: str, site: ThreadedDemoSite, tmp_path: Path) -> None:
    state = tmp_path / "state"
    crawl = ["crawl", site.url("lab", "/page/1"), *FAST, "--max-depth", "0", "--state", str(state)]
    result = runner.invoke(app, [*crawl, "--archive", f"s3://{BUCKET}/old"])
    assert result.exit_code == 0, result.output
    assert objects("old/")
    pruned = runner.invoke(app, ["archive", "prune", "--older-than", "0s", "--state", str(state)])
    assert pruned.exit_code == 0, pruned.output
    assert objects("old/") == {}
    listed = runner.invoke(app, ["archive", "list", "--state", str(state)])
    assert "0 capture(s)" in listed.output


def test_sigkill_loses_no_capture_whose_lease_end_was_stored(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    """What is promised: a page whose attempt is in the state file has its record in the
    spool file (written before the lease ended), and the next crawl uploads that file."""
    state, target = tmp_path / "state", f"s3://{BUCKET}/killed"
    args = [sys.executable, "-m", "crawlfleet", "crawl", site.url("quotes"), "--state", str(state)]
    args += ["--allow-private-addresses", "--delay", "0.02", "--archive", target]
    crawl = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while len(site.log) < 15:
        assert time.monotonic() < deadline, "the crawl did not get going"
        time.sleep(0.01)
    os.kill(crawl.pid, signal.SIGKILL)
    crawl.communicate(timeout=10)
    db = sqlite3.connect(state / "state.sqlite")
    reported = {url for (url,) in db.execute("SELECT url FROM attempts WHERE status IS NOT NULL")}
    db.close()
    assert reported
    assert objects("killed/") == {}  # the killed crawl's file was still in its spool
    again = subprocess.run(args, capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr
    archived = set()
    for data in objects("killed/").values():
        with contextlib.suppress(
            ArchiveLoadFailed, EOFError, OSError, zlib.error
        ):  # a cut last record
            for record in ArchiveIterator(io.BytesIO(data)):
                if record.rec_type in ("response", "revisit"):
                    archived.add(record.rec_headers["WARC-Target-URI"])
    assert reported <= archived


async def test_a_worker_uploads_what_a_dead_worker_of_its_host_left_in_its_spool(
    s3: str, tmp_path: Path, postgres_dsn: str
) -> None:
    settings = load_settings(
        None,
        redis_url="redis://127.0.0.1:1/0",
        postgres_dsn=postgres_dsn,
        archive=f"s3://{BUCKET}/fleet",
        state_dir=tmp_path / "state",
    )
    spools = tmp_path / "state" / "archive-spool"
    dead = spools / f"{socket.gethostname()}-{2**22 + 12345}"  # past pid_max: never alive
    dead.mkdir(parents=True)
    (dead / "arch-20260101000000-host-1-00000.warc.gz").write_bytes(b"left by a dead worker")
    async with AsyncExitStack() as stack:
        assert open_archive(settings, stack) is not None
    stored = objects("fleet/")
    assert stored == {"fleet/arch-20260101000000-host-1-00000.warc.gz": b"left by a dead worker"}
    assert not (dead / "arch-20260101000000-host-1-00000.warc.gz").exists()
