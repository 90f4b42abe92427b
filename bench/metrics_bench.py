"""Cost of metrics: CPU per page of an embedded crawl with ``--metrics-port`` against without.

Same site, nginx and crawl command as ``crawl_bench.py``; the two variants run alternately,
``--runs`` times each. With metrics, this script scrapes ``/metrics`` every ``--scrape-s``
seconds during the run (Prometheus would scrape every 15 s by default: 1 s is the harsh
case), so the CPU of rendering the families counts, in the crawler's process. Prints the
median CPU ms per page of both and the overhead (target: at most 5 % more).

    .venv/bin/python bench/metrics_bench.py --pages 4000 --runs 2
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import statistics
import sys
import threading
import urllib.request
from pathlib import Path

from crawl_bench import BENCH, WORK, command, ensure_site
from measure import ProcessUsage, run_measured
from nginx_server import NginxServer, read_log
from verify import verify

VARIANTS = ("without", "with")
PARSERS = BENCH / "bench_parsers.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Scraper(threading.Thread):
    """GETs ``url`` every ``every_s`` until stopped; counts the scrapes that answered."""

    def __init__(self, url: str, every_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.every_s = url, every_s
        self.done = threading.Event()
        self.scrapes = 0

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    response.read()
                self.scrapes += 1
            except OSError:
                continue  # not listening yet, or already gone


def run_once(
    variant: str, run_dir: Path, seeds: list[str], args: argparse.Namespace
) -> tuple[ProcessUsage, int]:
    """One crawl, its items in ``run_dir``; (usage, scrapes answered)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    argv = [sys.executable, "-m", "crawlfleet", *command("crawlfleet", seeds, run_dir, PARSERS)[1:]]
    scraper = None
    if variant == "with":
        port = free_port()
        argv += ["--metrics-port", str(port)]
        scraper = Scraper(f"http://127.0.0.1:{port}/metrics", args.scrape_s)
        scraper.start()
    usage = run_measured(argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log")
    if scraper is not None:
        scraper.done.set()
        scraper.join()
    return usage, scraper.scrapes if scraper is not None else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18411)
    parser.add_argument("--site", type=Path, default=WORK / "site", help="regenerated if unfit")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--scrape-s", type=float, default=1.0, help="seconds between scrapes")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per crawl run")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so nginx is stopped on the way out
    manifest = ensure_site(args.site, args.pages, args.hosts, args.port)
    per_page: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    with NginxServer(args.site, WORK / "nginx", list(manifest["hosts"]), args.port) as nginx:
        for run in range(1, args.runs + 1):
            for variant in VARIANTS:
                nginx.clear_log()
                run_dir = WORK / "runs" / f"metrics-{variant}-{run}"
                usage, scrapes = run_once(variant, run_dir, manifest["seeds"], args)
                items = run_dir / "items.jsonl"
                verdict = verify(manifest, read_log(nginx.access_log), items)
                ms = 1000 * usage.cpu_s / max(1, verdict.responses)
                per_page[variant].append(ms)
                print(
                    f"{variant:7} metrics, run {run}: {verdict.responses} responses, "
                    f"{usage.cpu_s:.2f} CPU s in {usage.wall_s:.1f} s = {ms:.3f} CPU ms/page, "
                    f"{scrapes} scrapes, exit {usage.exit_code}, "
                    f"{'OK' if verdict.ok else 'CHECK FAILED'}",
                    flush=True,
                )
    without = statistics.median(per_page["without"])
    with_ = statistics.median(per_page["with"])
    overhead = 100 * (with_ / without - 1)
    print(
        f"\nCPU ms per page (median of {args.runs}): without metrics {without:.3f}, "
        f"with --metrics-port and a scrape every {args.scrape_s:g} s {with_:.3f}: "
        f"{overhead:+.1f} % (target <= +5 %)"
    )


if __name__ == "__main__":
    main()
