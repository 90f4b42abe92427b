"""Content-Encoding decoding with a cap."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from crawlfleet.errors import FetchError, TooLarge
from crawlfleet.fetchers.decoding import decode_body

TEXT = b"<p>" + b"crawl " * 500 + b"</p>"
URL = "http://example.com/"

ENCODED = {
    "gzip": gzip.compress(TEXT),
    "x-gzip": gzip.compress(TEXT),
    "deflate": zlib.compress(TEXT),
    "br": brotli.compress(TEXT),
    "identity": TEXT,
    "gzip, br": brotli.compress(gzip.compress(TEXT)),
    "GZIP ": gzip.compress(TEXT),
}


@pytest.mark.parametrize("coding", ENCODED)
def test_known_codings_are_undone(coding: str) -> None:
    assert decode_body(ENCODED[coding], coding, cap_bytes=10_000, url=URL) == TEXT


def test_raw_deflate_is_accepted() -> None:
    raw = zlib.compress(TEXT, wbits=-zlib.MAX_WBITS)
    assert decode_body(raw, "deflate", cap_bytes=10_000, url=URL) == TEXT


def test_unknown_coding_leaves_the_body() -> None:
    body = gzip.compress(TEXT)
    assert decode_body(body, "gzip, zstd-custom", cap_bytes=10_000, url=URL) == body


TRUNCATED = {
    "gzip": gzip.compress(TEXT)[:-30],
    "deflate": zlib.compress(TEXT)[:-10],
    "raw deflate": zlib.compress(TEXT, wbits=-zlib.MAX_WBITS)[:-10],
    "br": brotli.compress(TEXT)[:-5],
}


@pytest.mark.parametrize("case", TRUNCATED)
def test_a_stream_that_stops_before_its_end_is_an_error_naming_its_coding(case: str) -> None:
    coding = case.removeprefix("raw ")
    with pytest.raises(FetchError, match=f"truncated {coding} body") as caught:
        decode_body(TRUNCATED[case], coding, cap_bytes=10_000, url=URL)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("case", TRUNCATED)
def test_a_truncating_caller_gets_what_a_cut_stream_has(case: str) -> None:
    coding = case.removeprefix("raw ")
    decoded = decode_body(TRUNCATED[case], coding, cap_bytes=10_000, url=URL, truncate=True)
    assert TEXT.startswith(decoded)


def test_every_gzip_member_is_decoded() -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"second ") + gzip.compress(b"third")
    assert decode_body(body, "gzip", cap_bytes=10_000, url=URL) == b"first second third"


def test_the_cap_counts_every_gzip_member() -> None:
    body = gzip.compress(TEXT) + gzip.compress(TEXT)
    with pytest.raises(TooLarge, match="decompresses to more than"):
        decode_body(body, "gzip", cap_bytes=len(TEXT) + 10, url=URL)


def test_bytes_after_the_last_gzip_member_that_start_none_are_ignored() -> None:
    body = gzip.compress(TEXT) + b"\0\0\0\0"
    assert decode_body(body, "gzip", cap_bytes=10_000, url=URL) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_exactly_at_the_cap_is_fine(coding: str) -> None:
    assert decode_body(ENCODED[coding], coding, cap_bytes=len(TEXT), url=URL) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "gzip, br"])
def test_one_byte_past_the_cap_is_too_large(coding: str) -> None:
    with pytest.raises(TooLarge, match="decompresses to more than"):
        decode_body(ENCODED[coding], coding, cap_bytes=len(TEXT) - 1, url=URL)


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br"])
def test_corrupt_data_is_a_permanent_error(coding: str) -> None:
    with pytest.raises(FetchError, match=f"corrupt {coding} body") as caught:
        decode_body(b"\x1f\x8b\x08garbage-garbage", coding, cap_bytes=10_000, url=URL)
    assert caught.value.transient is False


def test_more_than_two_codings_are_refused() -> None:
    body = gzip.compress(gzip.compress(gzip.compress(TEXT)))
    with pytest.raises(FetchError, match="3 content codings, at most 2") as caught:
        decode_body(body, "gzip, gzip, gzip", cap_bytes=10_000, url=URL)
    assert caught.value.transient is False


def test_two_codings_are_accepted() -> None:
    body = gzip.compress(gzip.compress(TEXT))
    assert decode_body(body, "gzip, gzip", cap_bytes=10_000, url=URL) == TEXT


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "gzip, br"])
def test_truncate_keeps_the_first_cap_bytes(coding: str) -> None:
    cap = len(TEXT) // 3
    assert (
        decode_body(ENCODED[coding], coding, cap_bytes=cap, url=URL, truncate=True) == (TEXT[:cap])
    )
