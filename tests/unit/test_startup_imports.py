"""What the CLI imports before a crawl runs: start-up is part of every crawl's CPU.

aiohttp (~90 ms to import here) serves only the demo site; a crawl should not load it
(decisions 0038, 0060). prometheus_client (~45 ms) serves
only metrics: the dashboard command and ``--metrics-port`` load it, nothing else.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _imported_by(statement: str, modules: list[str]) -> list[str]:
    probe = f"import sys; {statement}; print(','.join(m for m in {modules!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


def test_the_cli_loads_without_aiohttp() -> None:
    assert _imported_by("import crawlfleet.cli.main", ["aiohttp", "crawlfleet.demosite"]) == []


def test_the_cli_loads_without_prometheus_client_or_the_dashboard() -> None:
    modules = ["prometheus_client", "crawlfleet.ops.embedded", "crawlfleet.dashboard.app"]
    assert _imported_by("import crawlfleet.cli.main", modules) == []


def test_the_http_fetcher_imports_aiohttp_only_for_a_proxy() -> None:
    statement = (
        "from crawlfleet.fetchers import FetchOptions, HttpFetcher; HttpFetcher(FetchOptions())"
    )
    assert _imported_by(statement, ["aiohttp"]) == []


def test_the_cli_loads_without_tldextract() -> None:
    # tldextract and requests (~35 ms) serve registrable domains only (decision 0058).
    assert _imported_by("import crawlfleet.cli.main", ["tldextract", "requests"]) == []


def test_a_crawl_loads_playwright_only_when_its_browser_fetches(tmp_path: Path) -> None:
    # The browser lane is built wherever the strategy ladder keeps the browser rung, as by
    # default; Playwright (~37 ms) is loaded with the lane's first page (decision 0058).
    page = tmp_path / "index.html"
    page.write_text("<a href='other.html'>other</a>")
    settings = f"Settings(state_dir={str(tmp_path / 'state')!r}, max_pages=1)"
    statement = (
        "from crawlfleet import Crawl, Settings; "
        f"Crawl({settings}, seeds=[{page.as_uri()!r}]).run()"
    )
    assert _imported_by(statement, ["playwright", "crawlfleet.runtime.choice.browser_lane"]) == [
        "crawlfleet.runtime.choice.browser_lane"
    ]


def test_a_crawl_seeded_by_addresses_or_bare_hosts_does_not_load_tldextract() -> None:
    # Their registrable domain is the host itself (decision 0058): the corpus benchmark's
    # seeds are loopback addresses.
    seeds = ["http://127.0.0.21:18421/", "http://[::1]:8000/", "http://intranet/"]
    statement = f"from crawlfleet.frontier.scope import Scope; Scope.for_seeds({seeds!r})"
    assert _imported_by(statement, ["tldextract"]) == []
