"""One page of many links: what extracting and admitting them costs (decision 0043).

For each size a fresh process builds an index page in memory, then times (best of
``--repeat``) the default parser on it (lexbor tree and every followable link, no cap) and
the frontier's ``new_requests`` on its links (canonical form and scope of each), and reports
the process's peak RSS above what it held before the page was built. Two page shapes:

- ``index``: an API index of one page per function, ~130 bytes of HTML a link
  (``<dt><a href="api/mod_3/func_17.html"><code>mod_3.func_17()</code></a> ...``),
- ``bare``: the smallest link a trap can serve (``<a href=/t/123>x</a>``, ~20 bytes).

    .venv/bin/python bench/links_bench.py
    .venv/bin/python bench/links_bench.py --links 5000 50000 200000 --shape index
    .venv/bin/python bench/links_bench.py --links 440000 --shape bare --cap 100000

``--cap N`` gives the frontier the first N links only, as ``max_links_per_page`` does.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

SITE = "http://docs.test/"


def index_page(links: int) -> bytes:
    rows = [
        f'<dt><a href="api/mod_{i % 97}/func_{i}.html" title="mod_{i % 97}.func_{i}">'
        f"<code>mod_{i % 97}.func_{i}()</code></a> (in module mod_{i % 97})</dt>"
        for i in range(links)
    ]
    nav = "".join(f'<li><a href="/guide/{i}.html">Guide {i}</a></li>' for i in range(40))
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Index</title></head><body>'
        f"<nav><ul>{nav}</ul></nav><h1>Index</h1><dl>{''.join(rows)}</dl></body></html>"
    ).encode()


def bare_page(links: int) -> bytes:
    rows = "".join(f"<a href=/t/{i}>x</a>" for i in range(links))
    return f"<html><body>{rows}</body></html>".encode()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(links: int, shape: str, repeat: int, cap: int | None) -> dict[str, Any]:
    """Measure one page in this process (run by ``main`` in a fresh one per size)."""
    from crawlfleet.frontier.memory import MemoryQueueStore
    from crawlfleet.models import CrawlRequest, FetchResult
    from crawlfleet.parsing.default import default_parser
    from crawlfleet.runtime.policies import domain_policy
    from crawlfleet.runtime.wiring import build_frontier
    from crawlfleet.settings import Settings

    before_mb = peak_rss_mb()
    body = index_page(links) if shape == "index" else bare_page(links)
    page = FetchResult(SITE + "genindex.html", SITE + "genindex.html", 200,
                       {"content-type": "text/html; charset=utf-8"}, body, 0.0)  # fmt: skip
    frontier = build_frontier(
        Settings(), MemoryQueueStore(policy=domain_policy(Settings())), [SITE]
    )
    parent = CrawlRequest(page.url, "fp", "docs.test", depth=1)
    parse_s = admit_s = float("inf")
    found = offered = 0
    for _ in range(repeat):
        start = time.perf_counter()
        parsed = default_parser(page)
        parse_s = min(parse_s, time.perf_counter() - start)
        found = len(parsed.links)
        kept = parsed.links if cap is None else parsed.links[:cap]  # as ParseBudget cuts
        start = time.perf_counter()
        requests, offered, _ = frontier.new_requests(kept, parent)
        admit_s = min(admit_s, time.perf_counter() - start)
        del parsed, kept, requests
    return {
        "shape": shape,
        "links": links,
        "page_mb": round(len(body) / 1e6, 2),
        "links_found": found,
        "requests": offered,
        "parse_s": round(parse_s, 3),
        "new_requests_s": round(admit_s, 3),
        "peak_rss_added_mb": round(peak_rss_mb() - before_mb, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, nargs="+", default=[5_000, 50_000, 200_000])
    parser.add_argument("--shape", choices=("index", "bare", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cap", type=int, help="links kept for the frontier (max_links_per_page)")
    parser.add_argument("--one", nargs=2, metavar=("LINKS", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(int(args.one[0]), args.one[1], args.repeat, args.cap)))
        return
    shapes = ("index", "bare") if args.shape == "both" else (args.shape,)
    print(f"cap: {args.cap or 'none'}")
    print("| shape | links | page MB | links found | parse s | new_requests s | peak RSS + MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for shape in shapes:
        for links in args.links:
            command = [sys.executable, __file__, "--repeat", str(args.repeat)]
            if args.cap is not None:
                command += ["--cap", str(args.cap)]
            out = subprocess.run(
                [*command, "--one", str(links), shape], check=True, capture_output=True
            ).stdout
            r = json.loads(out)
            print(
                f"| {r['shape']} | {r['links']:,} | {r['page_mb']} | {r['links_found']:,} | "
                f"{r['parse_s']} | {r['new_requests_s']} | {r['peak_rss_added_mb']} |"
            )


if __name__ == "__main__":
    main()
