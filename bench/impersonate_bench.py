"""The impersonate fetcher (curl_cffi) against the aiohttp fetcher: one crawl of the bench site each.

The same embedded crawl as ``crawl_bench.py`` (private nginx, 64 concurrent requests, no delay,
``bench/bench_parsers.py``), run alternately with every link queued for the ``http`` kind
(the aiohttp fetcher) and for the ``impersonate`` kind (``BENCH_FETCHER=impersonate``; only the
seeds go through aiohttp). Per run: pages/s, CPU ms per page of the crawler's process, peak
RSS, and the access-log check against the manifest. Prints medians side by side and writes
the ``impersonate`` section of bench/RESULTS.md.

    .venv/bin/python bench/impersonate_bench.py                   # 4,000 pages, 3 runs each
    .venv/bin/python bench/impersonate_bench.py --pages 2000 --runs 1 --no-results
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crawl_bench import BENCH, CRAWLFLEET, REPO, WORK, ensure_site
from machine import busy_cpu_s, describe_machine
from measure import ProcessUsage, run_measured
from nginx_server import NginxServer, read_log
from results import write_section
from verify import Verdict, verify

KINDS = ("http", "impersonate")


@dataclass(frozen=True)
class Run:
    kind: str
    usage: ProcessUsage
    verdict: Verdict
    others_cpu_s: float

    @property
    def pages_per_s(self) -> float:
        return self.verdict.responses / self.usage.wall_s

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.usage.cpu_s / max(1, self.verdict.responses)


def run_once(
    kind: str, run: int, manifest: dict[str, Any], nginx: NginxServer, timeout_s: float
) -> Run:
    run_dir = WORK / "runs" / f"impersonate-bench-{kind}-{run}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    items = run_dir / "items.jsonl"
    argv = [str(CRAWLFLEET), "crawl", *manifest["seeds"], "--concurrency", "64"]
    argv += ["--per-domain-concurrency", "64", "--delay", "0", "--allow-private-addresses"]
    argv += ["--state", str(run_dir / "state"), "--fresh", "-o", str(items)]
    argv += ["--parsers", str(BENCH / "bench_parsers.py")]
    os.environ["BENCH_FETCHER"] = "" if kind == "http" else kind  # inherited by the crawl
    nginx.clear_log()
    busy_before_s = busy_cpu_s()
    usage = run_measured(argv, timeout_s=timeout_s, log_path=run_dir / "output.log")
    others_cpu_s = busy_cpu_s() - busy_before_s - usage.cpu_s
    verdict = verify(manifest, read_log(nginx.access_log), items)
    result = Run(kind, usage, verdict, others_cpu_s)
    print(
        f"{kind:11} run {run}: {verdict.responses} responses in {usage.wall_s:.1f} s = "
        f"{result.pages_per_s:.0f} pages/s, {result.cpu_ms_per_page:.2f} CPU ms/page, "
        f"peak RSS {usage.peak_rss_mb:.0f} MB, exit {usage.exit_code}, "
        f"{others_cpu_s:.1f} CPU s used by others meanwhile\n"
        f"{'':13}{'OK' if verdict.ok else 'CHECK FAILED'}: {verdict.summary()}",
        flush=True,
    )
    return result


def table(runs: list[Run]) -> str:
    rows = [
        ("pages/s", lambda r: r.pages_per_s, "{:.0f}"),
        ("CPU ms per page", lambda r: r.cpu_ms_per_page, "{:.2f}"),
        ("peak RSS MB", lambda r: r.usage.peak_rss_mb, "{:.0f}"),
        ("wall s", lambda r: r.usage.wall_s, "{:.1f}"),
        ("responses", lambda r: r.verdict.responses, "{:.0f}"),
        ("CPU s used meanwhile by nginx + others", lambda r: r.others_cpu_s, "{:.1f}"),
    ]
    lines = [
        "| metric (median of runs) | http (aiohttp) | impersonate (curl_cffi) | impersonate / http |",
        "| --- | --- | --- | --- |",
    ]
    for label, value, fmt in rows:
        medians = {k: statistics.median(value(r) for r in runs if r.kind == k) for k in KINDS}
        ratio = medians["impersonate"] / medians["http"] if medians["http"] else float("nan")
        cells = [fmt.format(medians[k]) for k in KINDS]
        lines.append(f"| {label} | {' | '.join(cells)} | {ratio:.2f}x |")
    for kind in KINDS:
        checks = "; ".join(
            f"{'OK' if r.verdict.ok else 'FAILED'} ({r.verdict.summary()})"
            for r in runs
            if r.kind == kind
        )
        lines.append(f"\n**{kind} checks**: {checks}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18411)
    parser.add_argument("--site", type=Path, default=WORK / "site", help="regenerated if unfit")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="per crawl run")
    parser.add_argument("--note", default="", help="said beside the figures (a loaded machine)")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so nginx is stopped on the way out
    machine = describe_machine()
    manifest = ensure_site(args.site, args.pages, args.hosts, args.port)
    runs: list[Run] = []
    with NginxServer(args.site, WORK / "nginx", list(manifest["hosts"]), args.port) as nginx:
        for run in range(1, args.runs + 1):
            for kind in KINDS:
                runs.append(run_once(kind, run, manifest, nginx, args.timeout_s))
    text = table(runs)
    print("\n" + text)
    if not args.no_results:
        rerun = "    .venv/bin/python bench/impersonate_bench.py " + " ".join(sys.argv[1:])
        note = f"\n\n**{args.note}**" if args.note else ""
        body = (
            "## Impersonate fetcher (curl_cffi) vs the aiohttp fetcher\n\n"
            f"{machine}{note}\n\nSite: {args.pages} pages on {args.hosts} hosts "
            "(bench/gen_site.py, seed 1), private nginx over plain HTTP; one embedded crawl "
            "per run with 64 concurrent requests overall and per host, no delay, "
            "bench/bench_parsers.py; `impersonate` queues every link for that kind "
            "(chrome146 headers, HTTP/1.1 as Chrome over plain http). Runs alternate.\n\n"
            f"{text}\n\nRerun:\n\n{rerun.rstrip()}\n"
        )
        write_section(args.results, "impersonate", body)
        print(f"\nwrote {args.results.relative_to(REPO)}")


if __name__ == "__main__":
    main()
