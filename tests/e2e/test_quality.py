"""Data quality end to end, embedded and distributed: expectations, the drift breaker and
resume-parser.

The demo site's ``catalog`` and ``redesign`` hosts serve the same 120 products; ``redesign``
changes its templates after 30 item pages. One parser with expectations reads both hosts.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psycopg
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.catalog import CATALOG_ITEMS, item_name, item_price
from tests.e2e.conftest import FAST as DISTRIBUTED_FAST
from tests.e2e.conftest import Workers, dispatch
from tests.fixtures.cli import CRAWLFLEET, SRC
from tests.fixtures.redis_server import free_port

runner = CliRunner(env={"COLUMNS": "300"})
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "4", "--ignore-robots"]
REDESIGN_AFTER = 30
DETECTION_BOUND = 7
"""First parses of redesigned pages until the drift fires (decision 0051: baseline 1/32
after 30 good pages, then 2/33)."""

PARSER = """
from crawlfleet import Expect, Follow, parser


@parser(
    pattern="/item/*",
    follow=[Follow(pattern="/item/")],
    expect=Expect(selectors=[".price"], fields=["name", "price"], min_items=1),
)
def item(page):
    name = page.css_first(NAME)
    price = page.css_first(PRICE)
    yield {
        "key": page.url,
        "name": name.text() if name is not None else None,
        "price": price.text() if price is not None else None,
    }
"""


@pytest.fixture
def site() -> Iterator[ThreadedDemoSite]:
    with ThreadedDemoSite() as demo:
        demo.redesign.set(REDESIGN_AFTER)
        yield demo


def write_parser(path: Path, *, fixed: bool) -> Path:
    name, price = ('".name, .title"', '".price, .cost"') if fixed else ('".name"', '".price"')
    text = PARSER.replace("NAME", name).replace("PRICE", price)
    if fixed:
        text = text.replace('selectors=[".price"]', 'selectors=[".price, .cost"]')
    path.write_text(text)
    return path


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def items(state: Path) -> dict[str, dict[str, str]]:
    with sqlite3.connect(state / "items.sqlite") as db:
        rows = db.execute("SELECT item_key, data FROM items WHERE item_type = 'item'")
        return {key: orjson.loads(data) for key, data in rows}


def assert_every_item_right(site: ThreadedDemoSite, stored: dict[str, dict[str, str]]) -> None:
    """Both catalogues' items stored once each, with the name and price their pages show."""
    assert len(stored) == 2 * CATALOG_ITEMS
    for role in ("catalog", "redesign"):
        for number in range(1, CATALOG_ITEMS + 1):
            item = stored[site.url(role, f"/item/{number}")]
            assert (item["name"], item["price"]) == (item_name(number), item_price(number))


def test_a_redesign_pauses_its_parser_there_and_a_fixed_parser_completes_the_crawl(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    seeds = [site.url("catalog"), site.url("redesign")]
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    redesign_host = urlsplit(site.url("redesign")).hostname or ""
    catalog_host = urlsplit(site.url("catalog")).hostname or ""

    code, output = cli("crawl", *seeds, "--state", str(state), "--parsers", str(broken), *FAST)
    assert code == 5, output  # a shortfall: pages dead-lettered
    assert f"fix the parser, then crawlfleet resume-parser item {redesign_host} --state" in output

    stats = orjson.loads((state / "stats.json").read_bytes())
    redesigned = stats["domains"][redesign_host]
    # the first parse of each page is watched; one page in flight per domain: the breaker
    # opened at the bound, and no redesigned page was fetched after it
    assert redesigned["quality.item.met"] == REDESIGN_AFTER
    # a mismatched page's retry may come due before the breaker opens (backoff with jitter),
    # but no redesigned page is fetched for the first time after it
    served = [r.path for r in site.log if r.role == "redesign" and r.path.startswith("/item/")]
    assert len(set(served[REDESIGN_AFTER:])) == DETECTION_BOUND
    assert redesigned["mismatch.item"] == DETECTION_BOUND
    # the other host finished, every item right
    quality = stats["quality"]["parsers"]["item"]["domains"]
    assert quality[catalog_host] == {
        "pages": CATALOG_ITEMS,
        "met_share": 1.0,
        "items_per_page": 1.0,
        "fill_rates": {"name": 1.0, "price": 1.0},
    }
    assert quality[redesign_host]["met_share"] < 1.0
    catalog = {k: v for k, v in items(state).items() if catalog_host in k}
    assert len(catalog) == CATALOG_ITEMS
    assert len(items(state)) == CATALOG_ITEMS + REDESIGN_AFTER  # no item from a mismatched page

    code, output = cli("status", "--state", str(state))
    assert code == 0, output
    assert f"drift: parser item on {redesign_host} (paused" in output
    assert f"on {catalog_host}" not in output
    (row,) = [line for line in output.splitlines() if "item" in line and catalog_host in line]
    assert [c.strip() for c in row.strip("│ ").split("│")] == [
        "item",
        catalog_host,
        str(CATALOG_ITEMS),
        "100%",
        "1.0",
        "name:100% price:100%",
        "-",
    ]
    code, output = cli("dlq", "classes", "--state", str(state))
    assert "mismatch: item" in output
    samples = list((state / "mismatch").glob("item-*/*.html"))
    assert samples  # a page kept per reason
    assert b'class="cost"' in samples[0].read_bytes()

    code, output = cli("resume-parser", "item", redesign_host, "--state", str(state))
    assert code == 0, output
    assert "pages requeued" in output
    fixed = write_parser(tmp_path / "fixed.py", fixed=True)
    code, output = cli("crawl", *seeds, "--state", str(state), "--parsers", str(fixed), *FAST)
    assert code == 0, output

    stored = items(state)
    assert_every_item_right(site, stored)
    code, output = cli("status", "--state", str(state))
    assert "drift:" not in output
    code, output = cli("dlq", "classes", "--state", str(state))
    assert "mismatch" not in output
    code, output = cli("resume-parser", "item", catalog_host, "--state", str(state))
    assert code != 0
    assert f"no drift of parser 'item' on '{catalog_host}'" in output


def test_with_an_archive_resume_parser_parses_the_mismatched_pages_again_unfetched(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state, archive = tmp_path / "state", tmp_path / "warc"
    seeds = [site.url("catalog"), site.url("redesign")]
    redesign_host = urlsplit(site.url("redesign")).hostname or ""
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    fixed = write_parser(tmp_path / "fixed.py", fixed=True)
    run = ["--state", str(state), "--archive", str(archive), *FAST]
    code, output = cli("crawl", *seeds, *run, "--parsers", str(broken))
    assert code == 5, output
    mismatched = {
        r.path for r in site.log if r.role == "redesign" and r.path.startswith("/item/")
    } - {f"/item/{n}" for n in range(1, CATALOG_ITEMS + 1)
         if site.url("redesign", f"/item/{n}") in items(state)}  # fmt: skip
    assert len(mismatched) == DETECTION_BOUND  # fetched, archived, dead-lettered

    site.clear_log()
    code, output = cli(
        "resume-parser", "item", redesign_host, "--state", str(state), "--parsers", str(fixed)
    )
    assert code == 0, output
    assert f"{DETECTION_BOUND} pages parsed from the archive" in output
    assert site.log == []  # no request made
    reparsed = {k: v for k, v in items(state).items() if redesign_host in k}
    assert len(reparsed) == REDESIGN_AFTER + DETECTION_BOUND

    code, output = cli("crawl", *seeds, *run, "--parsers", str(fixed))
    assert code == 0, output
    fetched = {r.path for r in site.log if r.role == "redesign"}
    assert not fetched & mismatched  # parsed from the archive, never fetched again
    stored = items(state)
    assert_every_item_right(site, stored)
    code, output = cli("dlq", "classes", "--state", str(state))
    assert "mismatch" not in output


RECRAWL_BOUND = 5
"""Redesigned pages a recrawl parses until the drift fires, its baseline kept from the first
run's 120 good pages (at the 0.02 floor: 5 x log(0.5/0.02) = 16.1 >= 15); a baseline
learned afresh by the recrawl's process would take 17."""


def test_a_recrawl_keeps_the_baseline_of_the_first_run_and_catches_a_redesign_at_once(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "crawl.toml"
    config.write_text('[crawl]\nrecrawl_after = "0s"\n')  # every page due again at once
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    host = urlsplit(site.url("redesign")).hostname or ""
    args = [site.url("redesign"), "--state", str(state), "--config", str(config)]
    args += ["--parsers", str(broken), *FAST]
    site.redesign.set(None)
    code, output = cli("crawl", *args)
    assert code == 0, output

    site.redesign.set(0)  # every page from now on in the new design
    site.clear_log()
    code, output = cli("crawl", *args, "--recrawl")
    assert code == 5, output  # the paused pages are dead-lettered
    assert f"fix the parser, then crawlfleet resume-parser item {host} --state" in output
    stats = orjson.loads((state / "stats.json").read_bytes())
    assert stats["domains"][host]["mismatch.item"] == RECRAWL_BOUND
    served = {r.path for r in site.log if r.path.startswith("/item/")}
    assert len(served) == RECRAWL_BOUND  # none fetched after the breaker opened


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_the_breaker_pauses_the_fleet_and_resume_parser_reopens_it_distributed(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    fixed = write_parser(tmp_path / "fixed.py", fixed=True)
    redesign_host = urlsplit(site.url("redesign")).hostname or ""
    catalog_host = urlsplit(site.url("catalog")).hostname or ""
    seeds = [site.url("catalog"), site.url("redesign")]
    target = ["--redis", redis_url, "--crawl-id", "drift"]
    crawl = [*seeds, *target, "--postgres", postgres_dsn, *DISTRIBUTED_FAST]

    # workers keep their mismatch samples in the crawl's state directory, on their machine
    samples = tmp_path / "state"
    crawl += ["--state", str(samples)]
    # two workers share the redesigned domain, and one drift test in the store
    fleet = [
        workers.start(redis_url, postgres_dsn, extra=("--parsers", str(broken))) for _ in range(2)
    ]
    first = dispatch(*crawl, "--parsers", str(broken))
    logs = "".join(worker.log() for worker in fleet)
    assert first.returncode == 5, first.stdout + logs  # a shortfall: dead letters
    assert "parser item drifted on " + redesign_host in logs
    # caught within the embedded bound: the fleet's 7th redesigned page fires it
    pages = REDESIGN_AFTER + DETECTION_BOUND
    assert f"after {pages} pages ({DETECTION_BOUND} mismatched" in logs, logs
    assert logs.count("parser item drifted on") == 1
    assert list((samples / "mismatch").glob("item-*/*.html"))
    code, output = cli("status", *target)
    assert f"drift: parser item on {redesign_host} (paused" in output, output
    stored = postgres_item_data(postgres_dsn)
    assert len(stored) == CATALOG_ITEMS + REDESIGN_AFTER
    # the dispatcher wrote the quality scores to PostgreSQL, exact on the catalog host
    code, output = cli("status", "--postgres", postgres_dsn, "--crawl-id", "drift")
    assert code == 0, output
    assert "quality scores of drift in PostgreSQL" in output
    (row,) = [line for line in output.splitlines() if catalog_host in line]
    assert [c.strip() for c in row.strip("│ ").split("│")] == [
        "item", catalog_host, str(CATALOG_ITEMS), "100%", "1.0", "name:100% price:100%",
    ]  # fmt: skip
    (row,) = [line for line in output.splitlines() if redesign_host in line]
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    # the other worker learns of the pause at its next page there: one more at most
    assert pages <= int(cells[2]) <= pages + 1, cells
    assert cells[3] == f"{REDESIGN_AFTER / int(cells[2]):.0%}"
    # the distributed dashboard shows them too
    port = free_port()
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", "--redis", redis_url, "--postgres", postgres_dsn,
         "--port", str(port)],
        env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        page = read_when_up(f"http://127.0.0.1:{port}/crawl/drift")
    finally:
        board.terminate()
        board.wait(timeout=10)
    shown = page[page.index('<div id="stored-quality">') :]
    assert (
        f'<td>item</td><td>{catalog_host}</td><td class="n">{CATALOG_ITEMS}</td>'
        '<td class="n">100.0 %</td><td class="n">1.0</td><td class="n">name:100% price:100%</td>'
    ) in shown

    # the fixed parser is deployed first: a worker still running the broken one would
    # claim the requeued pages
    for worker in fleet:
        worker.terminate()
    workers.start(redis_url, postgres_dsn, extra=("--parsers", str(fixed)))
    code, output = cli("resume-parser", "item", redesign_host, *target)
    assert code == 0, output
    second = dispatch(*crawl, "--parsers", str(fixed))
    assert second.returncode == 0, second.stdout

    stored = postgres_item_data(postgres_dsn)
    assert_every_item_right(site, stored)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_with_an_archive_a_distributed_resume_parser_parses_the_pages_again_unfetched(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    fixed = write_parser(tmp_path / "fixed.py", fixed=True)
    redesign_host = urlsplit(site.url("redesign")).hostname or ""
    seeds = [site.url("catalog"), site.url("redesign")]
    target = ["--redis", redis_url, "--crawl-id", "drift-archive"]
    crawl = [*seeds, *target, "--postgres", postgres_dsn, *DISTRIBUTED_FAST]
    crawl += ["--state", str(tmp_path / "state"), "--archive", str(tmp_path / "warc")]
    worker = workers.start(redis_url, postgres_dsn, extra=("--parsers", str(broken)))
    first = dispatch(*crawl, "--parsers", str(broken))
    assert first.returncode == 5, first.stdout + worker.log()
    stored = postgres_item_data(postgres_dsn)
    mismatched = {
        r.path for r in site.log if r.role == "redesign" and r.path.startswith("/item/")
    } - {urlsplit(key).path for key in stored if redesign_host in key}
    assert len(mismatched) == DETECTION_BOUND

    worker.terminate()
    workers.start(redis_url, postgres_dsn, extra=("--parsers", str(fixed)))
    site.clear_log()
    code, output = cli(
        "resume-parser", "item", redesign_host, *target, "--postgres", postgres_dsn,
        "--parsers", str(fixed),
    )  # fmt: skip
    assert code == 0, output
    assert f"{DETECTION_BOUND} pages parsed from the archive" in output
    assert [r.path for r in site.log if r.path != "/robots.txt"] == []  # no page fetched
    second = dispatch(*crawl, "--parsers", str(fixed))
    assert second.returncode == 0, second.stdout
    fetched = {r.path for r in site.log if r.role == "redesign"}
    assert not fetched & mismatched  # parsed from the archive, never fetched again
    stored = postgres_item_data(postgres_dsn)
    assert_every_item_right(site, stored)


def postgres_item_data(dsn: str) -> dict[str, dict[str, str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT item_key, data FROM items WHERE item_type = 'item'")
        return {key: data for key, data in rows}


TOKEN = "a-token-for-the-test"


def test_the_dashboard_lists_the_drift_and_its_action_resumes_the_parser(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    seeds = [site.url("catalog"), site.url("redesign")]
    broken = write_parser(tmp_path / "broken.py", fixed=False)
    redesign_host = urlsplit(site.url("redesign")).hostname or ""
    code, output = cli("crawl", *seeds, "--state", str(state), "--parsers", str(broken), *FAST)
    assert code == 5, output  # a shortfall: pages dead-lettered
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    board = subprocess.Popen(
        [CRAWLFLEET, "dashboard", "--state", str(state), "--port", str(port), "--token", TOKEN],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = read_when_up(f"{base}/crawl/default")
        assert '<div id="drifts">' in page
        assert '<div id="parsers">' in page
        # the drift's row: each expected field at rest against the run that fired it, and
        # the parser's sample pages, served sandboxed
        drifts = page[page.index('<div id="drifts">') :]
        assert "<strong>name 100.0 % → 0.0 %</strong>" in drifts
        assert "<strong>price 100.0 % → 0.0 %</strong>" in drifts
        links = re.findall(r'href="(/crawl/default/mismatch/[^"]+)"', drifts)
        assert links
        with urllib.request.urlopen(base + links[0], timeout=5) as reply:
            assert "sandbox" in reply.headers.get_all("content-security-policy")
            assert b'class="cost"' in reply.read()
        missing = f"{base}/crawl/default/mismatch/../state.sqlite"  # no way out of it
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(missing, timeout=5)
        refused.value.close()
        assert refused.value.code == 404
        form = urllib.parse.urlencode(
            {"token": TOKEN, "parser": "item", "domain": redesign_host}
        ).encode()
        with urllib.request.urlopen(f"{base}/crawl/default/resume-parser", form, 5) as reply:
            after = reply.read().decode()
        assert f"parser item re-opened on {redesign_host}: " in after
        assert "pages requeued" in after
    finally:
        board.terminate()
        board.wait(timeout=10)
    code, output = cli("status", "--state", str(state))
    assert "drift:" not in output


def read_when_up(url: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                return str(reply.read().decode())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
