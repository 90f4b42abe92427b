"""Item exports to object storage: ``crawlfleet crawl -o s3://...`` and ``crawlfleet export
-o s3://...`` upload the export file through the archive's boto3 client (moto's S3 server on
loopback), read back here; a failed upload names the object and keeps the local file."""

from __future__ import annotations

import io
import re
from pathlib import Path

import boto3
import pyarrow.parquet as pq
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.test_archive import EXAMPLES
from tests.e2e.test_archive_s3 import BUCKET, FAST, s3

__all__ = ["s3"]  # the fixture, used by name

runner = CliRunner(env={"COLUMNS": "300"})


def read_object(key: str) -> bytes:
    data: bytes = boto3.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    return data


def test_a_crawl_and_an_export_write_their_items_to_s3(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    example = EXAMPLES / "aisles"
    config = ["--config", str(example / "crawl.toml"), "--parsers", str(example / "parsers.py")]
    state, local = tmp_path / "state", tmp_path / "items.jsonl"
    seed = site.url("shop", "/aisles/")
    crawl = [*config, *FAST, "--state", str(state)]
    result = runner.invoke(
        app, ["crawl", seed, *crawl, "-o", f"s3://{BUCKET}/exports/run-1/items.parquet"]
    )
    assert result.exit_code == 0, result.output
    assert f"to s3://{BUCKET}/exports/run-1/items.parquet" in result.output
    exported = runner.invoke(app, ["export", "--state", str(state), "-o", str(local)])
    assert exported.exit_code == 0, exported.output
    lines = local.read_bytes().splitlines()
    assert lines
    table = pq.read_table(io.BytesIO(read_object("exports/run-1/items.parquet")))
    assert table.num_rows == len(lines)
    for suffix in ("jsonl", "csv"):
        key = f"exports/again/items.{suffix}"
        again = runner.invoke(app, ["export", "--state", str(state), "-o", f"s3://{BUCKET}/{key}"])
        assert again.exit_code == 0, again.output
        assert f"wrote {len(lines)} items to s3://{BUCKET}/{key}" in again.output
        if suffix == "jsonl":
            assert read_object(key) == local.read_bytes()
        else:
            assert len(read_object(key).splitlines()) == len(lines) + 1  # a header
    assert "testing-secret" not in result.output + exported.output


def test_a_failed_upload_names_the_object_and_keeps_the_file(
    s3: str, site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    crawl = ["crawl", site.url("lab", "/page/1"), *FAST, "--max-depth", "0", "--state", str(state)]
    assert runner.invoke(app, crawl).exit_code == 0
    failed = runner.invoke(
        app, ["export", "--state", str(state), "-o", "s3://no-such-bucket/out/items.jsonl"]
    )
    assert failed.exit_code == 2, failed.output
    message = " ".join(failed.output.split())
    assert "s3://no-such-bucket/out/items.jsonl" in message
    assert "NoSuchBucket" in message
    kept = re.search(r"kept in (\S+items\.jsonl)", message)
    assert kept is not None, message
    assert Path(kept.group(1)).is_file()
    Path(kept.group(1)).unlink()
