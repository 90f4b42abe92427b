"""The shipped examples (``examples/``) crawl the demo site and give exactly its data.

Each test runs ``crawlfleet crawl`` the way ``examples/README.md`` does (seed, ``--config``,
``--parsers``, ``-o``), then compares the exported items with the demo site's own data and
checks from the server's access log that only the pages the example follows were fetched.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import AUTHORS, PRODUCTS, QUOTES, ThreadedDemoSite
from crawlfleet.models import FetchResult
from crawlfleet.parsing import check_contracts, load_parsers
from crawlfleet.settings.loading import load_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SHOP = EXAMPLES / "shop"
QUOTES_DIR = EXAMPLES / "quotes"
DECLARATIVE = EXAMPLES / "quotes_declarative"
SAMPLE_PORT = ":8800"  # the examples' sample_url point at `crawlfleet demo-site`'s default port
FAST = ["--delay", "0", "--concurrency", "8", "--allow-private-addresses"]

runner = CliRunner(env={"COLUMNS": "300"})
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
Items = dict[tuple[str, str], dict[str, Any]]


def run_example(tmp_path: Path, seed: str, config: Path, *args: str) -> Items:
    """Run an example's crawl; its exported items by (type, key), the other fields as values."""
    out = tmp_path / "items.jsonl"
    state = tmp_path / "state"
    command = ["crawl", seed, "--config", str(config), *args, *FAST]
    result = runner.invoke(app, [*command, "--state", str(state), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return read_items(out)


def read_items(path: Path) -> Items:
    items: Items = {}
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        identity = (record.pop("type"), record.pop("key"))
        assert identity not in items, identity
        items[identity] = record
    return items


def rejects(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "state" / "items.sqlite") as db:
        return list(db.execute("SELECT item_type, reason FROM rejects"))


def fetched(site: ThreadedDemoSite, role: str) -> list[str]:
    """Paths the server saw on ``role``'s host, in arrival order."""
    return [record.path for record in site.log if record.role == role]


def assert_each_once(paths: list[str]) -> None:
    assert [path for path, n in Counter(paths).items() if n > 1] == []


# -- shop ---------------------------------------------------------------------------------


def expected_products(site: ThreadedDemoSite) -> Items:
    return {
        ("product", str(p.id)): {
            "id": p.id,
            "name": p.name,
            "price": {
                "amount": f"{p.price_pence // 100}.{p.price_pence % 100:02d}",
                "currency": "GBP",
            },
            "availability": p.stock,
            "rating": p.rating,
            "url": site.url("shop", p.url_path),
        }
        for p in PRODUCTS
    }


def test_shop_example_gives_every_product_and_fetches_only_listings_and_products(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    items = run_example(
        tmp_path, site.url("shop"), SHOP / "crawl.toml", "--parsers", str(SHOP / "parsers.py")
    )

    assert items == expected_products(site)
    assert rejects(tmp_path) == []
    # a steady site: every product page met the parser's expectations, no drift
    quality = orjson.loads((tmp_path / "state" / "stats.json").read_bytes())["quality"]
    assert quality["parsers"]["product"] | {"domains": {}} == {
        "pages": len(PRODUCTS),
        "met_share": 1.0,
        "items_per_page": 1.0,
        "fill_rates": {"id": 1.0, "name": 1.0},
        "domains": {},
    }
    paths = fetched(site, "shop")
    assert_each_once(paths)
    listings = [f"/catalogue/page-{n}.html" for n in range(1, len(PRODUCTS) // 10 + 1)]
    assert set(paths) == {"/robots.txt", "/", *listings, *(p.url_path for p in PRODUCTS)}
    # Products (priority 10) before the next listing page (priority 0): page N+1 is fetched
    # only after every product listed on page N.
    for number, listing in enumerate(listings[1:], start=1):
        on_previous = [p.url_path for p in PRODUCTS[(number - 1) * 10 : number * 10]]
        assert paths.index(listing) > max(paths.index(path) for path in on_previous)


# -- quotes -------------------------------------------------------------------------------

AUTHOR_BY_NAME = {author.name: author for author in AUTHORS}


def expected_quotes() -> Items:
    return {
        ("quote", q.text): {
            "text": q.text,
            "author": q.author,
            "author_key": AUTHOR_BY_NAME[q.author].slug,
            "tags": list(q.tags),
        }
        for q in QUOTES
    }


def iso_date(text: str) -> str:
    return datetime.strptime(text, "%B %d, %Y").date().isoformat()


def expected_authors(site: ThreadedDemoSite) -> Items:
    return {
        ("author", a.slug): {
            "name": a.name,
            "born_date": iso_date(a.born_date),
            "born_location": a.born_location.removeprefix("in "),
            "description": a.description,
            "url": site.url("quotes", a.url_path),
        }
        for a in AUTHORS
    }


def quote_paths() -> set[str]:
    pages = {f"/page/{n}/" for n in range(1, len(QUOTES) // 10 + 1)}
    return {"/robots.txt", "/", *pages, *(a.url_path for a in AUTHORS)}


def test_quotes_example_gives_every_quote_and_author(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    items = run_example(
        tmp_path,
        site.url("quotes"),
        QUOTES_DIR / "crawl.toml",
        "--parsers",
        str(QUOTES_DIR / "parsers.py"),
    )

    assert items == {**expected_quotes(), **expected_authors(site)}
    assert rejects(tmp_path) == []
    paths = fetched(site, "quotes")
    assert_each_once(paths)
    assert set(paths) == quote_paths()


def grouped_from_data() -> dict[str, list[str]]:
    """Author name -> the texts of their quotes, sorted, from the demo site's data."""
    grouped: dict[str, list[str]] = {a.name: [] for a in AUTHORS}
    for quote in QUOTES:
        grouped[quote.author].append(quote.text)
    return {name: sorted(texts) for name, texts in grouped.items()}


def test_quotes_grouped_by_author_with_the_readme_sql_and_jq(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    run_example(
        tmp_path,
        site.url("quotes"),
        QUOTES_DIR / "crawl.toml",
        "--parsers",
        str(QUOTES_DIR / "parsers.py"),
    )
    exported = tmp_path / "quotes.sqlite"
    result = runner.invoke(app, ["export", "--state", str(tmp_path / "state"), "-o", str(exported)])
    assert result.exit_code == 0, result.output

    sql = (QUOTES_DIR / "by_author.sql").read_text()
    with sqlite3.connect(exported) as db:
        rows = db.execute(sql).fetchall()
    assert [row[0] for row in rows] == sorted(a.name for a in AUTHORS)
    assert {name: sorted(orjson.loads(texts)) for name, _, texts in rows} == grouped_from_data()

    jq = shutil.which("jq")
    if jq is None:
        return  # the SQL above covers the grouping; jq is optional
    output = subprocess.run(
        [
            jq,
            "--slurp",
            "--from-file",
            str(QUOTES_DIR / "by_author.jq"),
            str(tmp_path / "items.jsonl"),
        ],
        capture_output=True,
        check=True,
        timeout=30,
    ).stdout
    authors = orjson.loads(output)
    assert {a["name"]: a["quotes"] for a in authors} == grouped_from_data()
    assert [a["key"] for a in authors] == [a.slug for a in sorted(AUTHORS, key=lambda a: a.name)]


def test_declarative_quotes_example_gives_the_same_quotes(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    items = run_example(tmp_path, site.url("quotes"), DECLARATIVE / "crawl.toml")

    authors = {
        ("author", a.name): {
            "name": a.name,
            "born_date": a.born_date,
            "born_location": a.born_location.removeprefix("in "),
            "description": a.description,
        }
        for a in AUTHORS
    }
    assert items == {**expected_quotes(), **authors}
    assert rejects(tmp_path) == []
    paths = fetched(site, "quotes")
    assert_each_once(paths)
    assert set(paths) == quote_paths()


# -- contracts ----------------------------------------------------------------------------


def fetch_from(site: ThreadedDemoSite, role: str) -> Any:
    """A fetch for ``check_contracts`` that sends the examples' sample URLs to the test site."""
    port = site.url(role).rsplit(":", 1)[1].rstrip("/")

    def get(url: str) -> FetchResult:
        started = time.monotonic()
        with NO_PROXY.open(url, timeout=10) as response:
            return FetchResult(
                url=url,
                final_url=response.url,
                status=response.status,
                headers={k.lower(): v for k, v in response.headers.items()},
                body=response.read(),
                elapsed_s=time.monotonic() - started,
            )

    async def fetch(url: str) -> FetchResult:
        assert SAMPLE_PORT in url, url
        return await asyncio.to_thread(get, url.replace(SAMPLE_PORT, f":{port}"))

    return fetch


async def test_examples_parsers_keep_their_contracts(site: ThreadedDemoSite) -> None:
    cases = [
        ("shop", load_parsers([str(SHOP / "parsers.py")], use_entry_points=False)),
        ("quotes", load_parsers([str(QUOTES_DIR / "parsers.py")], use_entry_points=False)),
        (
            "quotes",
            load_parsers(
                [],
                load_settings(DECLARATIVE / "crawl.toml").selector_parsers,
                use_entry_points=False,
            ),
        ),
    ]
    for role, registry in cases:
        reports = await check_contracts(registry, fetch_from(site, role))
        assert len(reports) == len(registry) == 2
        assert [r.problems for r in reports] == [(), ()], reports
