"""HTTPS on the HTTP fetcher's own connections: a certificate chain checked, TLS kept alive.

A throwaway CA (``openssl``) signs a certificate for 127.0.0.1; the fetcher trusts it only
through ``SSL_CERT_FILE``, which the system's default context reads.
"""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.models import CrawlRequest
from crawlfleet.settings import Settings
from tests.fixtures.scripted_server import ScriptedServer, serving

PAGE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ca.pem``, and ``server.pem`` / ``server.key`` for 127.0.0.1 signed by it."""
    where = tmp_path_factory.mktemp("tls")
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=crawlfleet test CA",
        cwd=where,
    )
    _openssl(
        "req",
        *ec,
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
        cwd=where,
    )
    (where / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        cwd=where,
    )
    return where


@pytest.fixture
async def tls_server(certificates: Path) -> AsyncIterator[ScriptedServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    async with serving(ScriptedServer(), context) as script:
        yield script


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


async def test_a_page_over_https_on_one_kept_alive_connection(
    tls_server: ScriptedServer, certificates: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates / "ca.pem"))
    tls_server.replies = [PAGE, PAGE]
    fetcher = HttpFetcher(Settings(allow_private_addresses=True))
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
    fetcher = HttpFetcher(Settings(allow_private_addresses=True))
    try:
        with pytest.raises(FetchError, match=r"TLS certificate of 127\.0\.0\.1 refused") as caught:
            await fetcher.fetch(_request(f"https://127.0.0.1:{tls_server.port}/"))
    finally:
        await fetcher.close()
    assert caught.value.transient is False
    assert "\n" not in str(caught.value)
    assert tls_server.requests == []
