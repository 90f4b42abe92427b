"""Adaptive fetcher benchmark: ``fetcher = "auto"`` on the demo site's mixed host.

Three embedded crawls (``crawlfleet crawl`` subprocesses, one at a time) of the mixed host
(``MIXED_STATIC`` pages that read the same over HTTP, ``MIXED_APP`` that need JavaScript):

- ``auto``: examples/mixed/parsers.py as shipped;
- ``http``: the same parsers with ``fetcher="http"`` (every page over HTTP: the app pages
  give no item);
- ``browser-needed``: only the ``MIXED_APP`` pages, seeded, fetched with the browser.

Prints the browser fetches of ``auto`` (from its attempt log) against the pages that need
JS (target: at most 1.2x), its items against the site's, and its wall time against
``http`` + ``browser-needed`` (target: at most 1.3x).

    .venv/bin/python bench/adaptive_bench.py --label "quiet machine"
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from results import write_section

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.demosite.mixed import MIXED_APP, MIXED_STATIC

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "adaptive"
CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
MIXED = REPO / "examples" / "mixed" / "parsers.py"
APP_ONLY = """
from crawlfleet.parsing import Response, parser


@parser("127.0.0.15", pattern="/app/*", item_type="product", fetcher="browser")
def app_product(response: Response):
    name, price = response.css_first(".name"), response.css_first(".price")
    if name is not None and price is not None:
        yield {"key": response.url.split("/", 3)[3], "name": name.text(), "price": price.text()}
"""


def crawl(name: str, seeds: list[str], parsers: Path) -> tuple[float, Path]:
    run = WORK / name
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    config = run / "crawl.toml"
    config.write_text(
        "[crawl]\nbrowser_pages = 4\nper_domain_concurrency = 8\ndelay_s = 0\n"
        "allow_private_addresses = true\nobey_robots = false\n"
    )
    argv = [str(CRAWLFLEET), "crawl", *seeds, "--config", str(config), "--parsers", str(parsers)]
    argv += ["--state", str(run / "state")]
    started = time.monotonic()
    with (run / "output.log").open("wb") as out:
        subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=True, timeout=900)
    return time.monotonic() - started, run / "state"


def count(state: Path, sql: str) -> int:
    with sqlite3.connect(state / "state.sqlite") as db:
        return int(db.execute(sql).fetchone()[0])


def items(state: Path) -> int:
    with sqlite3.connect(state / "items.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM items").fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="machine state not given")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    http_parsers = WORK / "mixed_http.py"
    http_parsers.write_text(MIXED.read_text().replace('fetcher="auto"', 'fetcher="http"'))
    app_parsers = WORK / "app_only.py"
    app_parsers.write_text(APP_ONLY)
    with ThreadedDemoSite() as site:
        home = site.url("mixed", "/")
        auto_s, auto = crawl("auto", [home], MIXED)
        http_s, _ = crawl("http", [home], http_parsers)
        app_urls = [site.url("mixed", f"/app/{n}") for n in range(1, MIXED_APP + 1)]
        needed_s, _ = crawl("browser-needed", app_urls, app_parsers)
    by_browser = count(auto, "SELECT count(*) FROM attempts WHERE fetcher = 'browser'")
    by_http = count(auto, "SELECT count(*) FROM attempts WHERE fetcher = 'http'")
    found = items(auto)
    text = "\n".join(
        [
            f"{args.label}; mixed host: {MIXED_STATIC} pages readable over HTTP, {MIXED_APP}"
            " needing JavaScript, 4 browser pages",
            "",
            "| figure | value | target |",
            "| --- | --- | --- |",
            f"| browser fetches of the auto crawl | {by_browser} ({by_browser / MIXED_APP:.2f}x"
            f" the {MIXED_APP} pages needing JS) | <= 1.2x |",
            f"| HTTP fetches of the auto crawl | {by_http} | |",
            f"| items of the auto crawl | {found} of {MIXED_STATIC + MIXED_APP} | all |",
            f"| wall s: auto | {auto_s:.1f} | |",
            f"| wall s: all-HTTP crawl + browser-needed pages | {http_s:.1f} + {needed_s:.1f}"
            f" = {http_s + needed_s:.1f} (auto: {auto_s / (http_s + needed_s):.2f}x) | <= 1.3x |",
        ]
    )
    print(text)
    if args.write:
        write_section(BENCH / "RESULTS.md", "adaptive", text)


if __name__ == "__main__":
    main()
