"""HTTPS on the HTTP fetcher's own connections: a certificate chain checked, TLS kept alive.

A throwaway CA (``tests/fixtures/tls.py``) signs a certificate for 127.0.0.1; the fetcher
trusts it only through ``SSL_CERT_FILE``, which the system's default context reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.models import CrawlRequest
from tests.fixtures.scripted_server import ScriptedServer

PAGE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


async def test_a_page_over_https_on_one_kept_alive_connection(
    tls_server: ScriptedServer, certificates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates / "ca.pem"))
    tls_server.replies = [PAGE, PAGE]
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        for path in ("/a", "/b"):
            result = await fetcher.fetch(_request(f"https://127.0.0.1:{tls_server.port}{path}"))
            assert (result.status, result.body) == (200, b"hello")
    finally:
        await fetcher.close()
    assert (tls_server.connections, len(tls_server.requests)) == (1, 2)


async def test_a_certificate_no_trusted_ca_signed_is_refused_for_good(
    tls_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-ca.pem"
    empty.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(empty))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True))
    try:
        with pytest.raises(FetchError, match=r"TLS certificate of 127\.0\.0\.1 refused") as caught:
            await fetcher.fetch(_request(f"https://127.0.0.1:{tls_server.port}/"))
    finally:
        await fetcher.close()
    assert caught.value.transient is False
    assert "\n" not in str(caught.value)
    assert tls_server.requests == []
