"""Parse-only benchmark: link + product extraction on the generated pages, no network.

(a) Scrapy: ``HtmlResponse`` + ``LinkExtractor`` + ``Selector`` CSS (bench/scrapy_parse.py,
run in the Scrapy venv). (b) crawlfleet: the parser the crawl would select for each URL from
bench/bench_parsers.py (selectolax ``Response``, ``extract_links``), then
``UrlRules.target`` on every link, as the frontier does before the seen-filter check.
Pages are read into memory first; each side reports its best of ``--repeat`` passes.

    .venv/bin/python bench/parse_bench.py                 # a 4,000-page sample
    .venv/bin/python bench/parse_bench.py --sample 0      # every page
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from machine import describe_machine
from results import write_section

from crawlfleet.models import FetchResult
from crawlfleet.parsing.plugins import marked, spec_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.settings import DEFAULT_STRIP_PARAMS
from crawlfleet.urls import UrlRules

BENCH = Path(__file__).resolve().parent
WORK = BENCH / "_work"
SCRAPY_PYTHON = WORK / "scrapy-venv" / "bin" / "python"
HEADERS = {"content-type": "text/html; charset=utf-8"}


def sample_pages(site: Path, sample: int) -> list[tuple[str, str]]:
    """``[(url, file)]``: every page of the manifest, or an evenly spread ``sample`` of them."""
    manifest: dict[str, Any] = json.loads((site / "manifest.json").read_text())
    pages = []
    for host, paths in manifest["hosts"].items():
        for path in paths["ok"]:
            file = site / host / ("index.html" if path == "/" else path.lstrip("/"))
            pages.append((f"http://{host}:{manifest['port']}{path}", str(file)))
    if 0 < sample < len(pages):
        step = len(pages) / sample
        pages = [pages[int(i * step)] for i in range(sample)]
    return pages


def bench_registry(parsers: Path) -> ParserRegistry:
    spec = importlib.util.spec_from_file_location("bench_parsers", parsers)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {parsers}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return ParserRegistry(
        spec_of(value, meta, str(parsers))
        for value in vars(module).values()
        if (meta := marked(value)) is not None
    )


def crawlfleet_pass(pages: list[tuple[str, bytes]], registry: ParserRegistry) -> tuple[int, int]:
    rules = UrlRules(DEFAULT_STRIP_PARAMS)  # a fresh request-URL cache per pass
    links = items = 0
    for url, body in pages:
        _, parse = registry.select(url)
        result = parse(FetchResult(url, url, 200, HEADERS, body, 0.0))
        for link in result.links:
            rules.target(link.url)
        links += len(result.links)
        items += len(result.items)
    return links, items


def run_crawlfleet(listing: list[tuple[str, str]], parsers: Path, repeat: int) -> dict[str, Any]:
    pages = [(url, Path(file).read_bytes()) for url, file in listing]
    registry = bench_registry(parsers)
    best_s = float("inf")
    links = items = 0
    for _ in range(repeat):
        start = time.perf_counter()
        links, items = crawlfleet_pass(pages, registry)
        best_s = min(best_s, time.perf_counter() - start)
    return {"pages": len(pages), "seconds": best_s, "links": links, "items": items}


def run_scrapy(listing: list[tuple[str, str]], repeat: int) -> dict[str, Any]:
    pages_json = WORK / "parse-pages.json"
    pages_json.write_text(json.dumps(listing))
    done = subprocess.run(
        [str(SCRAPY_PYTHON), str(BENCH / "scrapy_parse.py"), str(pages_json), "--repeat",
         str(repeat)],
        capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(scrapy: dict[str, Any], crawlfleet: dict[str, Any]) -> str:
    rows = []
    for name, r in (("Scrapy", scrapy), ("crawlfleet", crawlfleet)):
        rate = r["pages"] / r["seconds"]
        rows.append(
            f"| {name} | {r['pages']} | {r['seconds']:.2f} | {rate:.0f} | "
            f"{1000 * r['seconds'] / r['pages']:.2f} | {r['links']} | {r['items']} |"
        )
    ratio = (crawlfleet["pages"] / crawlfleet["seconds"]) / (scrapy["pages"] / scrapy["seconds"])
    return "\n".join(
        [
            "| parser stack | pages | best pass s | pages/s | ms per page | links | items |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            f"crawlfleet / Scrapy pages/s: **{ratio:.2f}x** (target ≥ 3x: "
            f"{'met' if ratio >= 3 else 'MISSED'})",
        ]
    )


def page_arguments(description: str) -> argparse.Namespace:
    """The options of a benchmark over the generated site's pages; exits if there is none."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--site", type=Path, default=WORK / "site")
    parser.add_argument("--sample", type=int, default=4000, help="pages; 0 for all")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parsers", type=Path, default=BENCH / "bench_parsers.py")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args()
    if not (args.site / "manifest.json").exists():
        sys.exit(f"no site at {args.site}: run bench/gen_site.py (or bench/crawl_bench.py) first")
    return args


def main() -> None:
    args = page_arguments(__doc__.split("\n")[0])
    listing = sample_pages(args.site, args.sample)
    scrapy = run_scrapy(listing, args.repeat)
    crawlfleet = run_crawlfleet(listing, args.parsers, args.repeat)
    text = report(scrapy, crawlfleet)
    print(text)
    if not args.no_results:
        rerun = "    .venv/bin/python bench/parse_bench.py " + " ".join(sys.argv[1:])
        body = (
            "## Parse only: link + product extraction, no network\n\n"
            f"{describe_machine()}\n\n{len(listing)} pages of the crawl site, in memory; best "
            f"of {args.repeat} passes. crawlfleet includes `UrlRules.target` on every link."
            f"\n\n{text}\n\nRerun:\n\n{rerun.rstrip()}\n"
        )
        write_section(args.results, "parse", body)
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
