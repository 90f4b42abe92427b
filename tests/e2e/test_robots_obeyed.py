"""robots.txt files as real sites write them (a BOM, versioned or two-word group names, an
unknown line inside a group), crawled with the CLI: the server saw no disallowed page
requested (decision 0039)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "4"]
INDEX = b'<html><title>home</title><a href="/ok">ok</a> <a href="/no/secret">no</a></html>'
PAGE = b"<html><title>page</title></html>"

ROBOTS = {
    "bom": b"\xef\xbb\xbfUser-agent: *\nDisallow: /no/\n",
    "versioned": b"User-agent: crawlfleet/1.0\nDisallow: /no/\n\nUser-agent: *\nDisallow: /\n",
    "spaced": b"User-agent: crawlfleet bot\nDisallow: /no/\n\nUser-agent: *\nDisallow: /\n",
    "unknown-line": b"User-agent: crawlfleet\nX-Note: hi\nUser-agent: otherbot\nDisallow: /no/\n",
}


class Host:
    """One origin (its own port on 127.0.0.1) serving ``robots`` and a two-link home page."""

    def __init__(self, robots: bytes) -> None:
        self.paths: list[str] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.paths.append(self.path)
                if self.path == "/robots.txt":
                    body, kind = robots, "text/plain"
                else:
                    body, kind = (INDEX if self.path == "/" else PAGE), "text/html"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hosts() -> Iterator[dict[str, Host]]:
    started = {name: Host(body) for name, body in ROBOTS.items()}
    yield started
    for host in started.values():
        host.close()


def crawl(tmp_path: Path, *args: str, exit_code: int = 0) -> None:
    result = runner.invoke(app, ["crawl", "--state", str(tmp_path / "state"), *args, *FAST])
    assert result.exit_code == exit_code, result.output


def test_robots_txt_files_as_sites_write_them_are_obeyed(
    hosts: dict[str, Host], tmp_path: Path
) -> None:
    crawl(tmp_path, *(host.url for host in hosts.values()))
    for name, host in hosts.items():
        assert "/no/secret" not in host.paths, name
        assert "/ok" in host.paths, name


def test_a_browser_like_user_agent_obeys_its_crawler_s_group(
    hosts: dict[str, Host], tmp_path: Path
) -> None:
    host = hosts["versioned"]
    crawl(tmp_path, host.url, "--user-agent", "Mozilla/5.0 (compatible; crawlfleet/0.1)")
    assert "/ok" in host.paths
    assert "/no/secret" not in host.paths


def test_robots_token_names_our_group(hosts: dict[str, Host], tmp_path: Path) -> None:
    host = hosts["versioned"]
    # every page refused: the seed's domain got nothing, a shortfall
    args = ("--user-agent", "Mozilla/5.0 (X11)", "--robots-token", "otherbot")
    crawl(tmp_path, host.url, *args, exit_code=5)
    assert host.paths == ["/robots.txt"]  # the * group: everything refused
