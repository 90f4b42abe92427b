"""A login's cookies go only where their scope allows: a redirect to another host gets none."""

from __future__ import annotations

from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.parsing.login import LoginSpec
from crawlfleet.parsing.response import Response
from crawlfleet.runtime.fetching.login import LoginSession
from crawlfleet.secretsfile import SiteSecrets
from tests.fixtures.scripted_server import ScriptedServer, serving


def reply(status: str, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\n{head}Content-Length: 2\r\n\r\nok".encode()


def cookie_of(request: bytes) -> str | None:
    for line in request.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "cookie":
            return value.strip()
    return None


async def _no_login(session: LoginSession) -> None:
    """Never called: the test drives the session itself."""


async def test_a_login_redirect_to_another_host_sends_it_no_cookie_of_the_first() -> None:
    site, other = ScriptedServer(), ScriptedServer()
    async with serving(site, host="127.0.0.2"), serving(other, host="127.0.0.3"):
        landing = f"http://127.0.0.3:{other.port}/landing"
        site.replies = [
            reply("302 Found", f"Location: {landing}", "Set-Cookie: sid=s3cret; Path=/"),
            reply("200 OK"),
        ]
        other.replies = [reply("200 OK", "Set-Cookie: theirs=1")]
        base = f"http://127.0.0.2:{site.port}/"
        spec = LoginSpec("127.0.0.2", f"{base}login", _no_login)
        fetcher = HttpFetcher(FetchOptions(allow_private_addresses=True), follow_redirects=False)
        session = LoginSession(fetcher, spec, base, SiteSecrets({}, {}))
        try:
            page: Response = await session.post("/login", form={"user": "alice"})
            assert page.url == landing
            await session.get("/members/")
        finally:
            await fetcher.close()
    assert cookie_of(other.requests[0]) is None  # was "sid=s3cret"
    assert cookie_of(site.requests[1]) == "sid=s3cret"  # its own host keeps it; not "theirs"
