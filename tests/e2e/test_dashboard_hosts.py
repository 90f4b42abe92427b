"""The dashboard against other sites' pages, over real HTTP: a foreign ``Host`` is refused
(DNS rebinding), framing is forbidden, and a link cannot make it show a message."""

from __future__ import annotations

import http.client
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from crawlfleet.demosite import ThreadedDemoSite
from tests.fixtures.cli import CRAWLFLEET, SRC, run_cli
from tests.fixtures.redis_server import free_port

pytestmark = pytest.mark.slow

TOKEN = "a-token-for-the-test"


class Reply:
    def __init__(self, status: int, headers: dict[str, str], body: str) -> None:
        self.status, self.headers, self.body = status, headers, body


def send(port: int, path: str, host: str, form: dict[str, str] | None = None) -> Reply:
    """One request to the dashboard with ``Host: host`` (a POST of ``form`` if given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        if form is None:
            conn.request("GET", path, headers={"Host": host})
        else:
            conn.request(
                "POST", path, body=urlencode(form),
                headers={"Host": host, "Content-Type": "application/x-www-form-urlencoded"},
            )  # fmt: skip
        reply = conn.getresponse()
        body = reply.read().decode()
        return Reply(reply.status, {k.lower(): v for k, v in reply.getheaders()}, body)
    finally:
        conn.close()


@pytest.fixture
def dashboard(site: ThreadedDemoSite, tmp_path: Path) -> Iterator[int]:
    state = tmp_path / "state"
    crawl = run_cli(
        "crawl", site.url("quotes"), "--state", str(state), "--allow-private-addresses",
        "--delay", "0", "--max-pages", "3", cwd=tmp_path,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.stderr
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}}
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", "--state", str(state), "--port", str(port),
         "--token", TOKEN, "--allowed-host", "board.example"],
        env={**env, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                send(port, "/", "127.0.0.1")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield port
    finally:
        board.terminate()
        board.wait(timeout=10)


def test_a_foreign_host_name_is_refused_and_framing_forbidden(dashboard: int) -> None:
    port = dashboard
    for host in ("evil.test", f"evil.test:{port}", "localhost.evil.test"):
        assert send(port, "/api/crawls", host).status == 421, host  # was 200
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "[::1]", "board.example:80"):
        reply = send(port, "/api/crawls", host)
        assert reply.status == 200, host
        assert reply.headers["x-frame-options"] == "DENY"
        assert reply.headers["content-security-policy"] == "frame-ancestors 'none'"


def test_a_link_cannot_make_the_dashboard_show_a_message(dashboard: int) -> None:
    port = dashboard
    host = f"127.0.0.1:{port}"
    forged = send(port, "/crawl/default?done=requeued+everything", host).body
    assert "requeued everything" not in forged  # was shown as the flash message
    reply = send(port, "/crawl/default/pause", host, form={"token": TOKEN})
    assert reply.status == 303
    target = reply.headers["location"]
    assert '<p class="flash" id="flash">paused</p>' in send(port, target, host).body
    assert 'id="flash"' not in send(port, target, host).body  # shown once
