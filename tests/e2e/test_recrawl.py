"""Keeping data fresh, embedded, end to end: a first crawl of the demo shop, then 5 % of the
product pages change price and 2 % disappear, then ``crawl --recrawl``; checked from the
server's access log and the change feed (``crawlfleet changes``)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import PRODUCTS, ThreadedDemoSite
from tests.e2e.conftest import CRAWLFLEET, Workers, attempt_workers, dispatch, start_dispatch
from tests.e2e.conftest import FAST as DISTRIBUTED_FAST

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"
FAST = ["--allow-private-addresses", "--delay", "0", "--concurrency", "8"]
REPRICED = (4, 17, 33)  # 3 of 50 product pages (>= 5 %)
REMOVED = (21,)  # 1 of 50 (2 %)

runner = CliRunner(env={"COLUMNS": "300"})


@pytest.fixture
def shop(site: ThreadedDemoSite) -> Iterator[ThreadedDemoSite]:
    site.edits.reset()
    yield site
    site.edits.reset()


def config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "crawl.toml"
    path.write_text((EXAMPLE / "crawl.toml").read_text() + extra)
    return path


def crawl(site: ThreadedDemoSite, tmp_path: Path, toml: Path, *args: str) -> str:
    result = runner.invoke(
        app,
        ["crawl", site.url("shop"), "--config", str(toml), "--parsers",
         str(EXAMPLE / "parsers.py"), "--state", str(tmp_path / "state"), *FAST, *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def pages(site: ThreadedDemoSite) -> list[tuple[str, int]]:
    return [(r.path, r.status) for r in site.log if r.role == "shop" and r.path != "/robots.txt"]


def changes(tmp_path: Path, *args: str) -> list[dict[str, object]]:
    result = runner.invoke(
        app, ["changes", "--state", str(tmp_path / "state"), "--format", "jsonl", *args]
    )
    assert result.exit_code == 0, result.output
    return [orjson.loads(line) for line in result.stdout.splitlines()]


def test_a_recrawl_fetches_each_known_page_once_and_records_what_changed(
    shop: ThreadedDemoSite, tmp_path: Path
) -> None:
    toml = config(tmp_path, '\nrecrawl_after = "0s"\n')
    crawl(shop, tmp_path, toml)
    first = sorted(path for path, _ in pages(shop))
    assert {p.url_path for p in PRODUCTS} <= set(first)
    assert [c["change"] for c in changes(tmp_path)] == ["new"] * len(PRODUCTS)

    for product_id in REPRICED:
        shop.edits.reprice(product_id, PRODUCTS[product_id - 1].price_pence + 100)
    for product_id in REMOVED:
        shop.edits.remove(product_id)
    shop.clear_log()
    since = time.time()
    output = crawl(shop, tmp_path, toml, "--recrawl")
    listings = {(i - 1) // 10 for i in REPRICED + REMOVED}  # catalogue pages showing them
    unchanged = len(first) - len(REPRICED) - len(REMOVED) - len(listings)
    changed = len(REPRICED) + len(listings)
    assert f"revisits: {unchanged} unchanged ({unchanged} answered 304), {changed} changed" in (
        output
    )

    fetched = pages(shop)
    assert [p for p, n in Counter(p for p, _ in fetched).items() if n > 1] == []
    assert sorted(p for p, _ in fetched) == first  # every known page, once
    status = dict(fetched)
    for product in PRODUCTS:
        expected = 200 if product.id in REPRICED else 404 if product.id in REMOVED else 304
        assert status[product.url_path] == expected, product.url_path
    assert status["/"] == 304

    feed = changes(tmp_path, "--since", dt.datetime.fromtimestamp(since, dt.UTC).isoformat())
    by_kind = Counter(c["change"] for c in feed)
    assert by_kind == {"changed": len(REPRICED), "gone": len(REMOVED)}
    for record in feed:
        if record["change"] == "changed":
            product = PRODUCTS[int(str(record["key"])) - 1]
            old = f"{product.price_pence // 100}.{product.price_pence % 100:02d}"
            new_pence = product.price_pence + 100
            new = f"{new_pence // 100}.{new_pence % 100:02d}"
            assert record["fields"] == {
                "price": {
                    "old": {"amount": old, "currency": "GBP"},
                    "new": {"amount": new, "currency": "GBP"},
                }
            }
        else:
            assert record == {**record, "type": "product", "key": str(REMOVED[0])}


def test_recrawl_and_continuous_together_are_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["crawl", "http://127.0.0.2:1/", "--recrawl", "--continuous", "--state", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "--recrawl" in result.output


@pytest.mark.slow
def test_a_distributed_recrawl_with_two_workers(
    shop: ThreadedDemoSite, tmp_path: Path, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    parsers = str(EXAMPLE / "parsers.py")
    for _ in range(2):
        workers.start(redis_url, postgres_dsn, concurrency=4, extra=("--parsers", parsers))
    toml = config(tmp_path, '\nrecrawl_after = "0s"\n')
    # More than one page of the shop in flight: with one at a time, the worker that ends a page
    # sees the next one due at once while the other polls blind, and may get none of them.
    args = [shop.url("shop"), "--config", str(toml), "--parsers", parsers, "--redis", redis_url,
            "--postgres", postgres_dsn, "--crawl-id", "fresh", "--per-domain-concurrency", "8",
            *DISTRIBUTED_FAST]  # fmt: skip
    first = dispatch(*args)
    assert first.returncode == 0, first.stdout
    first_paths = sorted(path for path, _ in pages(shop))
    for product_id in REPRICED:
        shop.edits.reprice(product_id, PRODUCTS[product_id - 1].price_pence + 100)
    for product_id in REMOVED:
        shop.edits.remove(product_id)
    shop.clear_log()
    since = dt.datetime.now(dt.UTC).isoformat()

    again = dispatch(*args, "--recrawl")
    assert again.returncode == 0, again.stdout
    fetched = pages(shop)
    assert [p for p, n in Counter(p for p, _ in fetched).items() if n > 1] == []
    assert sorted(p for p, _ in fetched) == first_paths
    unchanged = [p for p in PRODUCTS if p.id not in REPRICED + REMOVED]
    assert {dict(fetched)[p.url_path] for p in unchanged} == {304}
    assert len(attempt_workers(postgres_dsn)) == 2

    result = runner.invoke(
        app, ["changes", "--postgres", postgres_dsn, "--crawl-id", "fresh", "--since", since]
    )
    assert result.exit_code == 0, result.output
    feed = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert sorted((c["change"], c["key"]) for c in feed) == sorted(
        [("changed", str(i)) for i in REPRICED] + [("gone", str(i)) for i in REMOVED]
    )


@pytest.mark.slow
def test_a_continuous_crawl_revisits_what_becomes_due_until_ctrl_c(
    shop: ThreadedDemoSite, tmp_path: Path
) -> None:
    toml = config(tmp_path, '\nrecrawl_after = "0.4s"\n')
    argv = [shop.url("shop"), "--config", str(toml), "--parsers", str(EXAMPLE / "parsers.py"),
            "--state", str(tmp_path / "state"), *FAST, "--max-pages", "3"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(EXAMPLE.parents[1] / "src")}
    crawler = subprocess.Popen(
        [CRAWLFLEET, "crawl", *argv, "--continuous"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while sum(1 for path, _ in pages(shop) if path == "/") < 3:
            assert crawler.poll() is None, crawler.communicate()[0]
            assert time.monotonic() < deadline, pages(shop)
            time.sleep(0.2)
        crawler.send_signal(signal.SIGINT)
        output, _ = crawler.communicate(timeout=30)
    finally:
        if crawler.poll() is None:
            crawler.kill()
    assert crawler.returncode == 130, output
    home = [status for path, status in pages(shop) if path == "/"]
    assert home[0] == 200
    assert set(home[1:]) == {304}  # revisits of an unchanged page, never parsed again
    assert len({path for path, _ in pages(shop)}) == 3  # the budget's 3 pages, over and over
    shop.clear_log()
    time.sleep(0.5)  # recrawl_after: every page visited before Ctrl-C is due again
    crawl(shop, tmp_path, toml, "--recrawl", "--max-pages", "3")  # the state resumes
    assert {status for _, status in pages(shop)} == {304}


@pytest.mark.slow
def test_a_continuous_distributed_crawl_until_ctrl_c(
    shop: ThreadedDemoSite, tmp_path: Path, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    parsers = str(EXAMPLE / "parsers.py")
    workers.start(redis_url, postgres_dsn, concurrency=2, extra=("--parsers", parsers))
    toml = config(tmp_path, '\nrecrawl_after = "1s"\n')
    log_path = tmp_path / "dispatcher.log"
    dispatcher = start_dispatch(
        shop.url("shop"), "--config", str(toml), "--parsers", parsers, "--redis", redis_url,
        "--postgres", postgres_dsn, "--crawl-id", "always", "--max-pages", "3", "--continuous",
        *DISTRIBUTED_FAST, log_path=log_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while sum(1 for path, _ in pages(shop) if path == "/") < 3:
            assert dispatcher.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, pages(shop)
            time.sleep(0.2)
        dispatcher.send_signal(signal.SIGINT)
        assert dispatcher.wait(timeout=30) == 130, log_path.read_text()
    finally:
        if dispatcher.poll() is None:
            dispatcher.kill()
    home = [status for path, status in pages(shop) if path == "/"]
    assert home[0] == 200
    assert set(home[1:]) == {304}
