"""The embedded crawl end to end: the CLI against the demo site, checked from the server side."""

from __future__ import annotations

import csv
import sqlite3
from collections import Counter
from pathlib import Path

import orjson
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import PRODUCTS, ThreadedDemoSite, gaps_s
from crawlfleet.demosite.lab import NOFOLLOW_HIDDEN, SITEMAP_ONLY_PATHS

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]


def crawl(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["crawl", "--state", str(tmp_path / "state"), *args], env=env)
    return result.exit_code, result.output


def page_paths(site: ThreadedDemoSite, role: str) -> list[str]:
    return [r.path for r in site.log if r.role == role and r.path != "/robots.txt"]


def read_jsonl(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_shop_crawl_fetches_every_page_once_and_honours_robots(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    out = tmp_path / "items.jsonl"
    code, output = crawl(tmp_path, site.url("shop"), *FAST, "-o", str(out))
    assert code == 0, output
    paths = page_paths(site, "shop")
    assert [p for p, n in Counter(paths).items() if n > 1] == []
    assert not [p for p in paths if p.startswith("/accounts/")]
    assert {p.url_path for p in PRODUCTS} <= set(paths)
    robots = [r for r in site.log if r.role == "shop" and r.path == "/robots.txt"]
    assert len(robots) == 1
    records = read_jsonl(out)
    pages = [r for r in records if r["type"] == "page"]
    assert len(pages) == len(set(paths)) - sum(
        1 for r in site.log if r.role == "shop" and r.status >= 400
    )
    assert all(
        {"url", "final_url", "status", "title", "fetched_at", "key"} <= r.keys() for r in pages
    )


def test_politeness_gap_between_requests_to_one_host(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    code, output = crawl(
        tmp_path,
        site.url("quotes"),
        "--allow-private-addresses",
        "--delay",
        "0.1",
        "--max-pages",
        "12",
    )
    assert code == 0, output
    page_records = [r for r in site.log if r.role == "quotes" and r.path != "/robots.txt"]
    assert len(page_records) == 12
    assert min(gaps_s(page_records, "quotes")) >= 0.1


def test_lab_links_nofollow_redirects_and_robots(site: ThreadedDemoSite, tmp_path: Path) -> None:
    code, output = crawl(tmp_path, site.url("lab"), *FAST, "--sitemaps")
    assert code == 0, output
    paths = page_paths(site, "lab")
    counts = Counter(paths)
    assert [p for p, n in counts.items() if n > 1] == []
    assert "/private/secret" not in paths
    assert not set(NOFOLLOW_HIDDEN) & set(paths)
    assert set(SITEMAP_ONLY_PATHS) <= set(paths)
    assert not [p for p in paths if p.startswith("/hazards") or p.startswith("/trap")]


def test_robots_5xx_means_disallow_all_and_404_allow_all(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    env = {"CRAWLFLEET_BACKOFF_BASE_S": "0.01", "CRAWLFLEET_MAX_RETRIES": "1"}
    seeds = [site.url("robots-5xx"), site.url("robots-404")]
    code, output = crawl(tmp_path, *seeds, *FAST, env=env)
    assert code == 5, output  # dead letters left: a shortfall
    assert page_paths(site, "robots-5xx") == []
    listed = runner.invoke(app, ["dlq", "list", "--state", str(tmp_path / "state")])
    assert "robots.txt unavailable (503)" in listed.output
    assert len(page_paths(site, "robots-404")) >= 4


def test_flaky_page_is_retried_and_dead_ends_in_dlq(site: ThreadedDemoSite, tmp_path: Path) -> None:
    seeds = [site.url("lab", "/flaky/a?fail=2"), site.url("lab", "/status/500")]
    env = {"CRAWLFLEET_BACKOFF_BASE_S": "0.01", "CRAWLFLEET_MAX_RETRIES": "2"}
    code, output = crawl(tmp_path, *seeds, *FAST, env=env)
    assert code == 5, output  # dead letters left: a shortfall
    paths = Counter(page_paths(site, "lab"))
    assert paths["/flaky/a?fail=2"] == 3
    assert paths["/status/500"] == 3
    state = str(tmp_path / "state")
    listed = runner.invoke(app, ["dlq", "list", "--state", state])
    assert "/status/500" in listed.output
    assert "flaky" not in listed.output
    requeued = runner.invoke(app, ["dlq", "requeue", "--state", state])
    assert "requeued 1" in requeued.output
    code, output = crawl(tmp_path, *seeds, *FAST, env=env)
    assert code == 5, output  # it died again
    assert Counter(page_paths(site, "lab"))["/status/500"] == 6


def test_retry_after_blocks_the_domain(site: ThreadedDemoSite, tmp_path: Path) -> None:
    seeds = [site.url("lab", "/status/429?retry_after=1"), site.url("lab", "/page/1")]
    env = {"CRAWLFLEET_MAX_RETRIES": "1", "CRAWLFLEET_BACKOFF_BASE_S": "0"}
    code, output = crawl(tmp_path, *seeds, *FAST, "--max-pages", "2", env=env)
    assert code == 5, output  # dead letters left: a shortfall
    records = [r for r in site.log if r.role == "lab" and r.path != "/robots.txt"]
    first_429 = next(r for r in records if r.path.startswith("/status/429"))
    later = [r for r in records if r.monotonic_s > first_429.monotonic_s]
    assert later
    assert min(r.monotonic_s for r in later) - first_429.monotonic_s >= 1.0


def test_outputs_csv_and_sqlite(site: ThreadedDemoSite, tmp_path: Path) -> None:
    code, output = crawl(
        tmp_path, site.url("quotes"), *FAST, "--max-pages", "5", "-o", str(tmp_path / "p.csv")
    )
    assert code == 0, output
    with (tmp_path / "p.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 5
    assert {"type", "key", "url", "title"} <= set(rows[0])
    runner.invoke(
        app,
        [
            "export",
            "--state",
            str(tmp_path / "state"),
            "--format",
            "sqlite",
            "-o",
            str(tmp_path / "p.sqlite"),
        ],
    )
    with sqlite3.connect(tmp_path / "p.sqlite") as db:
        assert db.execute("select count(*) from items").fetchone()[0] == 5


def test_private_addresses_refused_by_default(site: ThreadedDemoSite, tmp_path: Path) -> None:
    code, output = crawl(tmp_path, site.url("shop"), "--delay", "0")
    assert code == 5, output  # dead letters left: a shortfall
    assert site.log == []
    listed = runner.invoke(app, ["dlq", "list", "--state", str(tmp_path / "state")])
    assert "address 127.0.0.2 is not allowed" in listed.output


def test_bad_input_gets_clear_errors(site: ThreadedDemoSite, tmp_path: Path) -> None:
    code, output = crawl(
        tmp_path,
        "http://[::1",
        "mailto:x@y",
        site.url("quotes", "/page/1/"),
        *FAST,
        "--max-pages",
        "1",
    )
    assert code == 0, output
    assert "malformed URL" in output
    assert "unsupported scheme" in output

    config = tmp_path / "bad.toml"
    config.write_text("[crawl]\ndelay = 3\n")
    code, output = crawl(tmp_path, site.url("quotes"), "--config", str(config))
    assert code == 2
    assert "unknown setting 'delay'" in output

    code, output = crawl(tmp_path, "ftp://x/")
    assert code == 2
    assert "no valid seed" in output

    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "state.sqlite").write_bytes(b"this is not a database" * 100)
    result = runner.invoke(app, ["crawl", site.url("quotes"), "--state", str(corrupt), *FAST])
    assert result.exit_code == 2
    assert "state.sqlite" in result.output


def test_unreachable_host_is_dead_lettered_with_reason(tmp_path: Path) -> None:
    env = {"CRAWLFLEET_MAX_RETRIES": "1", "CRAWLFLEET_BACKOFF_BASE_S": "0"}
    code, output = crawl(tmp_path, "http://127.0.0.9:9/", *FAST, env=env)
    assert code == 5, output  # dead letters left: a shortfall
    listed = runner.invoke(app, ["dlq", "list", "--state", str(tmp_path / "state")])
    assert "127.0.0.9" in listed.output
    assert "connect" in listed.output.lower()
