"""Recrawl benchmark: a first crawl, 5 % of the product pages change, then ``--recrawl`` beside
the same pass made with ``--fresh``.

Generates the static bench site (bench/gen_site.py) in its own directory (its files are
edited), serves it with a private nginx (which answers ``If-None-Match`` /
``If-Modified-Since`` with 304 for static files), and runs crawlfleet three times on one
state directory, measuring each run's process tree (``measure.py``):

1. the first crawl (``recrawl_after = "0s"``), every page fetched;
2. the prices of 5 % of the product pages are rewritten; ``crawl --recrawl`` revisits every
   known page once, sending its validators;
3. ``crawl --fresh``: the same pass from scratch.

Checked against nginx's access log (status and body bytes of every request): no page fetched
twice in a pass, requests that transferred a body, 304s; and the change feed
(``crawlfleet changes``) against the edited products. Targets: bodies <= 6 % of the pages,
CPU per page of the recrawl <= 0.3x the first crawl's, changed items = exactly the edited.

    .venv/bin/python bench/recrawl_bench.py                 # 4,000 pages on 4 hosts
    .venv/bin/python bench/recrawl_bench.py --pages 20000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gen_site
from machine import busy_cpu_s, describe_machine
from measure import ProcessUsage, run_measured
from nginx_server import NginxServer
from results import write_section

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "recrawl"
CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
PRICE = re.compile('<p class="price">£(\\d+)\\.(\\d{2})</p>'.encode())
PRODUCT_ID = re.compile(rb'data-product_id="([^"]+)"')


@dataclass(frozen=True)
class Pass:
    """One crawl run and what nginx saw of it."""

    name: str
    usage: ProcessUsage
    requests: int
    pages: int  # requests other than robots.txt
    bodies: int  # requests answered with a body (bytes > 0)
    not_modified: int
    repeated: int  # pages fetched more than once
    others_cpu_s: float

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.usage.cpu_s / max(1, self.pages)


def access_log(path: Path) -> list[tuple[str, int, str, int]]:
    """(host, status, uri, body bytes) of every request."""
    lines = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = raw.split("\t")
        if len(parts) >= 6:
            lines.append((parts[1], int(parts[2]), parts[4], int(parts[5])))
    return lines


def crawl(
    name: str, seeds: list[str], state: Path, nginx: NginxServer, *flags: str, timeout_s: float
) -> Pass:
    argv = [str(CRAWLFLEET), "crawl", *seeds, "--config", str(WORK / "crawl.toml")]
    argv += ["--parsers", str(BENCH / "bench_parsers.py"), "--state", str(state), *flags]
    argv += ["--concurrency", "64", "--per-domain-concurrency", "64", "--delay", "0"]
    argv += ["--allow-private-addresses"]
    nginx.clear_log()
    busy_before_s = busy_cpu_s()
    usage = run_measured(argv, timeout_s=timeout_s, log_path=WORK / f"{name}.log")
    others_cpu_s = busy_cpu_s() - busy_before_s - usage.cpu_s
    if usage.exit_code != 0:
        sys.exit(f"{name}: exit {usage.exit_code}; see {WORK / f'{name}.log'}")
    log = access_log(nginx.access_log)
    pages = [line for line in log if line[2] != "/robots.txt"]
    counts = Counter((host, uri) for host, _, uri, _ in pages)
    result = Pass(
        name=name,
        usage=usage,
        requests=len(log),
        pages=len(pages),
        bodies=sum(1 for line in log if line[3] > 0),
        not_modified=sum(1 for line in log if line[1] == 304),
        repeated=sum(1 for n in counts.values() if n > 1),
        others_cpu_s=others_cpu_s,
    )
    print(
        f"{name:8}: {result.requests} requests ({result.bodies} with a body, "
        f"{result.not_modified} x 304) in {usage.wall_s:.1f} s, {usage.cpu_s:.1f} CPU s = "
        f"{result.cpu_ms_per_page:.2f} ms/page; {others_cpu_s:.1f} CPU s used by others",
        flush=True,
    )
    return result


def edit_prices(site: Path, manifest: dict[str, Any], share: float, seed: int) -> set[str]:
    """Raise the price of ``share`` of the product pages; the product ids edited."""
    products = [
        site / ip / path.lstrip("/")
        for ip, host in manifest["hosts"].items()
        for path in host["ok"]
        if path.startswith("/p/")
    ]
    chosen = random.Random(seed).sample(sorted(products), round(share * len(products)))
    edited = set()
    for path in chosen:
        html = path.read_bytes()
        found = PRICE.search(html)
        product_id = PRODUCT_ID.search(html)
        if found is None or product_id is None:
            sys.exit(f"no price or id in {path}")
        pence = int(found.group(1)) * 100 + int(found.group(2)) + 1
        price = f'<p class="price">£{pence // 100}.{pence % 100:02d}</p>'.encode()
        path.write_bytes(html[: found.start()] + price + html[found.end() :])
        edited.add(product_id.group(1).decode())
    return edited


def changed_keys(state: Path, since: float) -> Counter[tuple[str, str]]:
    """(change, key) of the change feed since ``since``."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since - 1))
    argv = [str(CRAWLFLEET), "changes", "--state", str(state), "--since", when]
    out = subprocess.run([*argv, "--format", "jsonl"], capture_output=True, text=True, check=True)
    feed = [json.loads(line) for line in out.stdout.splitlines()]
    return Counter((record["change"], record["key"]) for record in feed)


def startup_cpu_s() -> float:
    """CPU seconds of ``crawlfleet crawl --help``: the imports every run pays once."""
    return run_measured(
        [str(CRAWLFLEET), "crawl", "--help"], timeout_s=60, log_path=WORK / "startup.log"
    ).cpu_s


def table(
    first: Pass, again: Pass, fresh: Pass, known: int, detected: str, startup_s: float
) -> str:
    def ratio(value: float, base: float) -> str:
        return f"{value / base:.2f}x" if base else "n/a"

    def net_ms(p: Pass) -> float:
        return 1000 * max(0.0, p.usage.cpu_s - startup_s) / max(1, p.pages)

    rows = [
        ("requests", lambda p: f"{p.requests}"),
        ("requests that transferred a body", lambda p: f"{p.bodies}"),
        ("... per known page (robots.txt included)", lambda p: f"{100 * p.bodies / known:.1f} %"),
        ("304 Not Modified", lambda p: f"{p.not_modified}"),
        ("pages fetched twice", lambda p: f"{p.repeated}"),
        ("wall s", lambda p: f"{p.usage.wall_s:.1f}"),
        ("CPU s", lambda p: f"{p.usage.cpu_s:.1f}"),
        ("CPU ms per page", lambda p: f"{p.cpu_ms_per_page:.2f}"),
        ("... vs the first crawl", lambda p: ratio(p.cpu_ms_per_page, first.cpu_ms_per_page)),
        (f"CPU ms per page without start-up ({startup_s:.2f} s)", lambda p: f"{net_ms(p):.2f}"),
        ("... vs the first crawl", lambda p: ratio(net_ms(p), net_ms(first))),
        ("peak RSS MB", lambda p: f"{p.usage.peak_rss_mb:.0f}"),
        ("CPU s used meanwhile by nginx + others", lambda p: f"{p.others_cpu_s:.1f}"),
    ]
    head = "| metric | first crawl | `--recrawl` | `--fresh` |"
    lines = [head, "| --- | --- | --- | --- |"]
    lines += [f"| {label} | {f(first)} | {f(again)} | {f(fresh)} |" for label, f in rows]
    bodies_ok = again.bodies <= 0.06 * known
    cpu_ok = again.cpu_ms_per_page <= 0.3 * first.cpu_ms_per_page
    lines.append(
        f"\nTargets of the recrawl: bodies ≤ 6 % of pages: {'met' if bodies_ok else 'MISSED'}; "
        f"CPU per page ≤ 0.3x the first crawl's: {'met' if cpu_ok else 'MISSED'}; "
        f"changed items detected: {detected}."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=4_000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18421)
    parser.add_argument("--share", type=float, default=0.05, help="product pages changed")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per crawl run")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so nginx is stopped on the way out
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
    )
    machine = describe_machine()
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    site = WORK / "site"
    print(f"generating {args.pages} pages on {args.hosts} hosts under {site} ...", flush=True)
    manifest = gen_site.generate(site, args.pages, args.hosts, args.port, seed=1)
    (WORK / "crawl.toml").write_text('[crawl]\nrecrawl_after = "0s"\n')
    state = WORK / "state"
    seeds = manifest["seeds"]
    with NginxServer(site, WORK / "nginx", list(manifest["hosts"]), args.port) as nginx:
        first = crawl("first", seeds, state, nginx, timeout_s=args.timeout_s)
        edited = edit_prices(site, manifest, args.share, seed=2)
        since = time.time()
        again = crawl("recrawl", seeds, state, nginx, "--recrawl", timeout_s=args.timeout_s)
        feed = changed_keys(state, since)
        fresh = crawl("fresh", seeds, state, nginx, "--fresh", timeout_s=args.timeout_s)
    detected = {key for (change, key) in feed if change == "changed"}
    others = sum(n for (change, _), n in feed.items() if change != "changed")
    exact = detected == edited and others == 0
    verdict = (
        f"{len(detected)} of {len(edited)} edited, "
        f"{'exactly the edited ones' if exact else 'NOT exactly the edited ones'}"
        f" ({others} other changes)"
    )
    known = first.pages - first.repeated
    text = table(first, again, fresh, known, verdict, startup_cpu_s())
    print("\n" + text)
    if not args.no_results:
        rerun = "    .venv/bin/python bench/recrawl_bench.py " + " ".join(sys.argv[1:])
        body = (
            "## Recrawl: conditional requests after 5 % of the product pages changed\n\n"
            f"{machine}\n\nSite: {args.pages} pages on {args.hosts} hosts (bench/gen_site.py, "
            "seed 1), served by a private nginx (ETag and Last-Modified on static files); "
            "crawlfleet with bench/bench_parsers.py, 64 requests in flight, no delay, "
            f'`recrawl_after = "0s"`; {len(edited)} product prices edited between the first '
            "crawl and the recrawl; the `--fresh` pass runs last on the same state. "
            "Start-up: the CPU of `crawlfleet crawl --help` (imports), paid once per run.\n\n"
            f"{text}\n\nRerun:\n\n{rerun.rstrip()}\n"
        )
        write_section(args.results, "recrawl", body)
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
