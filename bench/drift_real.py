"""Drift alarms on a steady real site, and the detection delay on the demo's redesign.

Steady site: the Python documentation (Debian's ``python3.11-doc``: Sphinx HTML) served as
static files from a private ``http.server`` on loopback, crawled by ``crawlfleet crawl``
(embedded) with a parser whose expectations every Sphinx page meets (``div.body`` matches,
the item's ``title`` is filled). Reported: pages parsed, the share that met the
expectations, and the drift alarms (expected: none). ``--runs`` crawls, each from a fresh
state.

Redesign: the demo site's ``redesign`` host switches templates after 30 item pages; an
embedded crawl with the same parser as ``tests/e2e/test_quality.py`` reports at which
redesigned page the drift fired (its ``mismatch.item`` counter: the breaker lets no other
redesigned page be parsed). The two-worker figure is the distributed test's assertion
(``tests/e2e/test_quality.py -k distributed``).

    PYTHONPATH=src .venv/bin/python bench/drift_real.py --runs 3
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import orjson

from crawlfleet.demosite import ThreadedDemoSite

DOCS = Path("/usr/share/doc/python3.11/html")
CRAWLFLEET = str(Path(sys.executable).parent / "crawlfleet")
FAST = ["--allow-private-addresses", "--delay", "0", "--ignore-robots"]

DOCS_PARSER = """
from crawlfleet import Expect, Follow, parser


@parser(
    pattern="*.html",
    follow=[Follow(pattern=r"\\.html$")],
    expect=Expect(selectors=[SELECTOR], fields=["title"], min_items=1),
)
def page(page):
    title = page.css_first("title")
    yield {"key": page.url, "title": title.text().strip() if title is not None else None}
"""

DEMO_PARSER = """
from crawlfleet import Expect, Follow, parser


@parser(
    pattern="/item/*",
    follow=[Follow(pattern="/item/")],
    expect=Expect(selectors=[".price"], fields=["name", "price"], min_items=1),
)
def item(page):
    name = page.css_first(".name")
    price = page.css_first(".price")
    yield {
        "key": page.url,
        "name": name.text() if name is not None else None,
        "price": price.text() if price is not None else None,
    }
"""
REDESIGN_AFTER = 30
SELECTORS = {
    "div.body": "every page has it",
    "div.body section": "36 of the 530 pages lack it (6.8 %: the indexes, search, ...)",
    "span.pre": "50 of the 530 pages lack it (9.4 %)",
}
"""The expectations crawled: one every page meets, and two that real pages miss now and
then (counted with lexbor over the files): odd pages as a real site has them, clustered."""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def docs_server(root: Path) -> Iterator[str]:
    """The documentation served from ``root`` at a loopback URL, for the block's duration."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/contents.html"
    finally:
        server.shutdown()
        server.server_close()


def crawl(seeds: list[str], state: Path, parsers: Path, *extra: str) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    args = [CRAWLFLEET, "crawl", *seeds, "--state", str(state), "--parsers", str(parsers)]
    started = time.perf_counter()
    done = subprocess.run(
        [*args, *FAST, *extra], capture_output=True, text=True, env=env, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


def alarms(state: Path) -> dict[str, int]:
    """Domain -> drift marks its strategy slot holds, from ``stats.json`` and ``status``."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    status = subprocess.run(
        [CRAWLFLEET, "status", "--state", str(state)],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    found: dict[str, int] = {}
    for line in status.stdout.splitlines():
        if line.startswith("drift: parser "):
            domain = line.split(" on ", 1)[1].split(" (", 1)[0]
            found[domain] = found.get(domain, 0) + 1
    return found


def steady(runs: int, work: Path) -> None:
    if not DOCS.is_dir():
        sys.exit(f"{DOCS}: install python3.11-doc (apt-get install python3-doc) first")
    with docs_server(DOCS) as seed:
        for selector, why in SELECTORS.items():
            parsers = work / "docs_parser.py"
            parsers.write_text(DOCS_PARSER.replace("SELECTOR", repr(selector)))
            for run in range(1, runs + 1):
                state = work / f"docs-{run}"
                code, output, elapsed_s = crawl(
                    [seed], state, parsers, "--concurrency", "8", "--fresh"
                )
                stats = orjson.loads((state / "stats.json").read_bytes())
                score = stats["quality"]["parsers"].get("page", {})
                print(
                    f"steady, expect {selector!r} ({why}), run {run}: exit {code}, "
                    f"{score.get('pages', 0)} pages parsed, met share {score.get('met_share')}, "
                    f"drift alarms {sum(alarms(state).values())}, {elapsed_s:.1f} s",
                    flush=True,
                )
                if code not in (0, 5):  # 5: the odd pages end as dead letters
                    print(output[-2000:])


def redesign(work: Path) -> None:
    parsers = work / "demo_parser.py"
    parsers.write_text(DEMO_PARSER)
    with ThreadedDemoSite() as site:
        site.redesign.set(REDESIGN_AFTER)
        state = work / "redesign"
        host = urlsplit(site.url("redesign")).hostname or ""
        code, _, _ = crawl([site.url("redesign")], state, parsers, "--concurrency", "4")
        stats = orjson.loads((state / "stats.json").read_bytes())
        mismatched = int(stats["domains"][host].get("mismatch.item", 0))
        print(
            f"redesign (embedded): exit {code}, the drift fired at redesigned page "
            f"{mismatched} (after {REDESIGN_AFTER} good ones); alarms {alarms(state)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        steady(args.runs, work)
        redesign(work)


if __name__ == "__main__":
    main()
