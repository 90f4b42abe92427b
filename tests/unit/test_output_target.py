"""``output`` (``-o``): a path, or an ``s3://`` object URL kept as text (a path would fold
its ``//``), each with a suffix that names the export format."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.archive.exports import export_to, is_object_url
from crawlfleet.errors import ConfigError
from crawlfleet.settings.loading import load_settings


def test_an_object_url_stays_text_and_a_file_name_becomes_a_path() -> None:
    assert (
        load_settings(None, output="s3://b/run/items.parquet").output == "s3://b/run/items.parquet"
    )
    assert load_settings(None, output="out/items.jsonl").output == Path("out/items.jsonl")
    assert load_settings(None, output=Path("items.csv")).output == Path("items.csv")


@pytest.mark.parametrize(
    "url",
    ["s3://bucket", "s3://bucket/", "s3://bucket/prefix/", "s3:///items.jsonl", "s3://b/x.txt"],
)
def test_an_object_url_without_a_name_or_format_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="output"):
        load_settings(None, output=url)


def test_a_local_target_is_written_in_place(tmp_path: Path) -> None:
    out = tmp_path / "items.jsonl"
    assert not is_object_url(out)
    assert is_object_url("s3://b/items.jsonl")
    assert export_to(out, lambda local: local.write_bytes(b"{}\n")) == 3
    assert out.read_bytes() == b"{}\n"
