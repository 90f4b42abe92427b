"""FileFetcher on real files in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.errors import FetchError, TooLarge
from crawlfleet.fetchers import FileFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from tests.fixtures.clock import FakeClock


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="", fetcher="file")


@pytest.fixture
def fetcher() -> FileFetcher:
    return FileFetcher(FetchOptions(max_body_bytes=4096), clock=FakeClock(start=42.0))


async def test_html_file_is_a_200_with_guessed_type(fetcher: FileFetcher, tmp_path: Path) -> None:
    page = tmp_path / "index.html"
    page.write_bytes(b"<html>\xff</html>")
    result = await fetcher.fetch(_request(page.as_uri()))
    assert result.status == 200
    assert result.body == b"<html>\xff</html>"
    assert result.content_type == "text/html"
    assert result.is_html
    assert result.headers["content-length"] == str(len(result.body))
    assert result.headers["last-modified"].endswith("GMT")
    assert result.final_url == result.url == page.as_uri()
    assert (result.fetcher, result.fetched_at) == ("file", 42.0)


async def test_unknown_extension_is_octet_stream(fetcher: FileFetcher, tmp_path: Path) -> None:
    blob = tmp_path / "data.unknownext"
    blob.write_bytes(b"\x00\x01")
    result = await fetcher.fetch(_request(blob.as_uri()))
    assert result.content_type == "application/octet-stream"


async def test_percent_encoded_path(fetcher: FileFetcher, tmp_path: Path) -> None:
    page = tmp_path / "a page é.txt"
    page.write_text("text")
    uri = page.as_uri()
    assert "%20" in uri
    result = await fetcher.fetch(_request(uri))
    assert (result.status, result.body, result.content_type) == (200, b"text", "text/plain")


@pytest.mark.parametrize("name", ["missing.html", "", "missing/deeper.html"])
async def test_missing_file_or_directory_is_404(
    fetcher: FileFetcher, tmp_path: Path, name: str
) -> None:
    result = await fetcher.fetch(_request((tmp_path / name).as_uri()))
    assert result.status == 404
    assert result.body == b""


async def test_file_past_the_limit_is_too_large(fetcher: FileFetcher, tmp_path: Path) -> None:
    big = tmp_path / "big.html"
    big.write_bytes(b"x" * 4097)
    with pytest.raises(TooLarge, match="4097 bytes") as caught:
        await fetcher.fetch(_request(big.as_uri()))
    assert caught.value.transient is False


async def test_file_at_the_limit_is_read(fetcher: FileFetcher, tmp_path: Path) -> None:
    edge = tmp_path / "edge.html"
    edge.write_bytes(b"x" * 4096)
    assert len((await fetcher.fetch(_request(edge.as_uri()))).body) == 4096


@pytest.mark.parametrize("url", ["file://otherhost/etc/hosts", "http://example.com/"])
async def test_remote_or_non_file_urls_are_refused(fetcher: FileFetcher, url: str) -> None:
    with pytest.raises(FetchError) as caught:
        await fetcher.fetch(_request(url))
    assert caught.value.transient is False


async def test_localhost_host_is_local(fetcher: FileFetcher, tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text("<p>")
    result = await fetcher.fetch(_request(f"file://localhost{page}"))
    assert result.status == 200
