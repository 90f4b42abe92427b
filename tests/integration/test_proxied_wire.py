"""The HTTP fetcher through a proxy on its own wire (decision 0060): absolute-form requests,
``CONNECT`` tunnels with TLS inside, the proxy's credentials, its refusals named, pools kept
per proxy and origin.

A scripted server plays a proxy where the bytes it reads are the point; a real tinyproxy
carries the tunnels to a loopback TLS server (``tests/fixtures/tls.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crawlfleet.archive.protocols import Sent
from crawlfleet.errors import FetchError
from crawlfleet.fetchers import HttpFetcher
from crawlfleet.fetchers.credentials import basic_auth
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Via
from crawlfleet.models import CrawlRequest, FetchResult
from tests.fixtures.scripted_server import ScriptedServer, serving
from tests.fixtures.tinyproxy import ProxyFarm

PAGE = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
SETTINGS = FetchOptions(allow_private_addresses=True, read_timeout_s=5, connect_timeout_s=5)


def _request(url: str) -> CrawlRequest:
    return CrawlRequest(url=url, fingerprint="f", domain="d")


@pytest.fixture
async def fake_proxy() -> AsyncIterator[ScriptedServer]:
    async with serving(ScriptedServer()) as script:
        yield script


async def test_plain_http_goes_in_absolute_form_with_the_proxys_credentials_on_one_connection(
    fake_proxy: ScriptedServer,
) -> None:
    fake_proxy.replies = [PAGE, PAGE]
    fetcher = HttpFetcher(SETTINGS)
    via = Via(f"http://127.0.0.1:{fake_proxy.port}", ("crawler", "s3cret"))
    try:
        for path in ("/a", "/b?q=1"):
            result = await fetcher.fetch(_request(f"http://site.example:8080{path}"), via=via)
            assert (result.status, result.body) == (200, b"hello")
    finally:
        await fetcher.close()
    first, second = fake_proxy.requests
    assert first.startswith(
        b"GET http://site.example:8080/a HTTP/1.1\r\nHost: site.example:8080\r\n"
    )
    assert second.startswith(b"GET http://site.example:8080/b?q=1 HTTP/1.1\r\n")
    expected = f"Proxy-Authorization: {basic_auth('crawler', 's3cret')}\r\n".encode()
    assert expected in first
    assert expected in second
    assert fake_proxy.connections == 1


class _Kept:
    """A ``ResponseKeeper`` that holds what it is given."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    async def keep(self, result: FetchResult, sent: Sent) -> None:
        self.sent.append(sent)


async def test_the_archive_never_gets_the_proxys_credentials(fake_proxy: ScriptedServer) -> None:
    fake_proxy.replies = [PAGE]
    kept = _Kept()
    fetcher = HttpFetcher(SETTINGS, keeper=kept)
    via = Via(f"http://127.0.0.1:{fake_proxy.port}", ("crawler", "s3cret"))
    try:
        await fetcher.fetch(_request("http://site.example/"), via=via)
    finally:
        await fetcher.close()
    assert b"Proxy-Authorization" in fake_proxy.requests[0]
    ((sent,),) = [kept.sent]
    assert {name.lower() for name in sent.request_headers} >= {"user-agent"}
    assert all(name.lower() != "proxy-authorization" for name in sent.request_headers)
    assert sent.address is None  # the proxy's address is not the server's


async def test_a_proxy_named_by_a_private_name_is_the_operators_choice(
    fake_proxy: ScriptedServer,
) -> None:
    fake_proxy.replies = [PAGE]
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=False))
    try:
        result = await fetcher.fetch(
            _request("http://site.example/"), via=Via(f"http://localhost:{fake_proxy.port}")
        )
    finally:
        await fetcher.close()
    assert result.status == 200


async def test_another_origin_or_other_credentials_get_another_connection(
    fake_proxy: ScriptedServer,
) -> None:
    fake_proxy.replies = [PAGE, PAGE, PAGE]
    fetcher = HttpFetcher(SETTINGS)
    proxy = f"http://127.0.0.1:{fake_proxy.port}"
    try:
        await fetcher.fetch(_request("http://a.example/"), via=Via(proxy, ("u", "1")))
        await fetcher.fetch(_request("http://b.example/"), via=Via(proxy, ("u", "1")))
        await fetcher.fetch(_request("http://a.example/"), via=Via(proxy, ("u", "2")))
    finally:
        await fetcher.close()
    assert fake_proxy.connections == 3


async def test_a_proxys_own_407_to_a_plain_http_request_is_the_response(
    fake_proxy: ScriptedServer,
) -> None:
    fake_proxy.replies = [
        b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
    ]
    fetcher = HttpFetcher(SETTINGS)
    try:
        result = await fetcher.fetch(
            _request("http://site.example/"), via=Via(f"http://127.0.0.1:{fake_proxy.port}")
        )
    finally:
        await fetcher.close()
    assert result.status == 407  # runtime.fetching.proxy_link judges it the proxy's refusal


async def test_a_refused_tunnel_is_a_one_line_transient_error_naming_the_status(
    fake_proxy: ScriptedServer,
) -> None:
    fake_proxy.replies = [
        b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 4\r\n\r\nnope"
    ]
    fetcher = HttpFetcher(SETTINGS)
    try:
        with pytest.raises(
            FetchError, match=r"refused the tunnel to site\.example:443: 407"
        ) as err:
            await fetcher.fetch(
                _request("https://site.example/"),
                via=Via(f"http://127.0.0.1:{fake_proxy.port}", ("u", "p")),
            )
    finally:
        await fetcher.close()
    assert err.value.transient is True
    assert "\n" not in str(err.value)
    (connect,) = fake_proxy.requests
    assert connect.startswith(b"CONNECT site.example:443 HTTP/1.1\r\nHost: site.example:443\r\n")
    assert f"Proxy-Authorization: {basic_auth('u', 'p')}".encode() in connect


async def test_a_proxy_nobody_listens_on_cannot_be_connected_to(proxies: ProxyFarm) -> None:
    closed = proxies.closed()
    fetcher = HttpFetcher(SETTINGS)
    try:
        with pytest.raises(FetchError, match=r"cannot connect to 127\.0\.0\.1:\d+ \(http://x"):
            await fetcher.fetch(_request("http://x.example/"), via=Via(closed))
    finally:
        await fetcher.close()


async def test_a_hanging_proxy_times_out_reading(proxies: ProxyFarm) -> None:
    hanging = proxies.hanging()
    fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True, read_timeout_s=0.3))
    try:
        with pytest.raises(FetchError, match=r"timeout reading http://x\.example/: no data"):
            await fetcher.fetch(_request("http://x.example/"), via=Via(hanging))
    finally:
        await fetcher.close()


async def test_https_through_tinyproxy_tunnels_tls_to_the_server_and_keeps_the_tunnel(
    proxies: ProxyFarm,
    tls_server: ScriptedServer,
    certificates: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates / "ca.pem"))
    proxy = proxies.start(bind="127.0.1.41", auth=("crawler", "s3cret"))
    tls_server.replies = [PAGE, PAGE]
    fetcher = HttpFetcher(SETTINGS)
    via = Via(f"http://127.0.0.1:{proxy.port}", ("crawler", "s3cret"))
    try:
        for path in ("/a", "/b"):
            url = f"https://127.0.0.1:{tls_server.port}{path}"
            result = await fetcher.fetch(_request(url), via=via)
            assert (result.status, result.body) == (200, b"hello")
    finally:
        await fetcher.close()
    assert tls_server.connections == 1  # one tunnel, kept alive
    assert [r.split(b"\r\n")[0] for r in tls_server.requests] == [
        b"GET /a HTTP/1.1",
        b"GET /b HTTP/1.1",
    ]
    assert all(b"proxy-authorization" not in r.lower() for r in tls_server.requests)


async def test_tinyproxy_refusing_our_credentials_for_a_tunnel(
    proxies: ProxyFarm, tls_server: ScriptedServer
) -> None:
    proxy = proxies.start(bind="127.0.1.42", auth=("crawler", "s3cret"))
    fetcher = HttpFetcher(SETTINGS)
    via = Via(f"http://127.0.0.1:{proxy.port}", ("crawler", "wrong"))
    try:
        with pytest.raises(FetchError, match=r"refused the tunnel to 127\.0\.0\.1:\d+: 401"):
            await fetcher.fetch(_request(f"https://127.0.0.1:{tls_server.port}/"), via=via)
    finally:
        await fetcher.close()
    assert tls_server.connections == 0


async def test_a_certificate_no_trusted_ca_signed_is_refused_through_a_tunnel(
    proxies: ProxyFarm, tls_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-ca.pem"
    empty.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(empty))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    proxy = proxies.start(bind="127.0.1.43")
    fetcher = HttpFetcher(SETTINGS)
    try:
        with pytest.raises(FetchError, match=r"TLS certificate of 127\.0\.0\.1 refused") as err:
            await fetcher.fetch(
                _request(f"https://127.0.0.1:{tls_server.port}/"),
                via=Via(f"http://127.0.0.1:{proxy.port}"),
            )
    finally:
        await fetcher.close()
    assert err.value.transient is False
    assert tls_server.requests == []
