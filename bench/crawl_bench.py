"""Crawl benchmark: crawlfleet's embedded crawl against Scrapy on the same static site.

Generates the site (if absent), serves it with a private nginx, then runs the two crawlers one
at a time, alternately, ``--runs`` times each. Per run: pages/s (responses in nginx's access
log / wall seconds), CPU seconds of the crawler's process tree, CPU ms per page, peak RSS, and
a check of the access log against the manifest. Prints a table of medians and writes it to
bench/RESULTS.md.

    .venv/bin/python bench/crawl_bench.py            # 20,000 pages, 4 hosts, 3 runs each
    .venv/bin/python bench/crawl_bench.py --pages 4000 --runs 1 --tools crawlfleet
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gen_docs
import gen_site
from machine import busy_cpu_s, describe_machine
from measure import ProcessUsage, run_measured
from nginx_server import NginxServer, read_log
from results import write_section
from verify import Verdict, verify

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work"
SCRAPY_PYTHON = WORK / "scrapy-venv" / "bin" / "python"
CRAWLFLEET = REPO / ".venv" / "bin" / "crawlfleet"
TOOLS = ("crawlfleet", "scrapy")


@dataclass(frozen=True)
class RunResult:
    tool: str
    run: int
    usage: ProcessUsage
    verdict: Verdict
    others_cpu_s: float  # CPU the rest of the machine (nginx included) used during the run
    state_bytes: dict[str, int]  # crawlfleet's state directory on disk, by file and table

    @property
    def pages_per_s(self) -> float:
        return self.verdict.responses / self.usage.wall_s

    @property
    def distinct_per_s(self) -> float:
        """Expected paths fetched (each counted once) per wall second."""
        return self.verdict.fetched_expected / self.usage.wall_s

    @property
    def state_mb(self) -> float:
        """The state directory's files (database, WAL) in MB; 0 for Scrapy."""
        files = (".sqlite", ".sqlite-wal", ".sqlite-shm")
        return sum(size for name, size in self.state_bytes.items() if name.endswith(files)) / 1e6

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.usage.cpu_s / max(1, self.verdict.responses)


def ensure_site(
    site: Path, pages: int, hosts: int, port: int, *, small: bool = False, docs: bool = False
) -> dict[str, Any]:
    """The manifest of the site under ``site``, regenerating it when its shape differs.

    ``docs``: the documentation-like site of ``gen_docs.py`` (one host) instead of the shop.
    """
    hosts = 1 if docs else hosts
    manifest_file = site / "manifest.json"
    if manifest_file.exists():
        manifest: dict[str, Any] = json.loads(manifest_file.read_text())
        total = sum(len(h["ok"]) for h in manifest["hosts"].values())
        shape_ok = manifest["port"] == port and len(manifest["hosts"]) == hosts
        shape_ok = shape_ok and manifest.get("small_pages", False) == small
        shape_ok = shape_ok and (manifest.get("kind") == "docs") == docs
        if shape_ok and abs(total - pages) <= pages // 50 + 10:
            return manifest
        shutil.rmtree(site)
    print(f"generating {pages} pages on {hosts} hosts under {site} ...", flush=True)
    if docs:
        return gen_docs.generate(site, pages, port, seed=1)
    return gen_site.generate(site, pages, hosts, port, seed=1, small=small)


def state_bytes(state_dir: Path) -> dict[str, int]:
    """Bytes on disk of a crawl's state directory: per file, then per table or index."""
    found: dict[str, int] = {}
    for file in sorted(state_dir.glob("*.sqlite*")) if state_dir.is_dir() else []:
        found[file.name] = file.stat().st_size
        if file.suffix != ".sqlite":
            continue
        db = sqlite3.connect(file.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            query = "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            for name, size in db.execute(query):
                found[f"{file.stem}.{name}"] = size
        finally:
            db.close()
    return found


def command(tool: str, seeds: list[str], run_dir: Path, parsers: Path | None) -> list[str]:
    items = run_dir / "items.jsonl"
    if tool == "scrapy":
        return [str(SCRAPY_PYTHON), str(BENCH / "scrapy_spider.py"), "--out", str(items), *seeds]
    argv = [str(CRAWLFLEET), "crawl", *seeds, "--concurrency", "64"]
    argv += ["--per-domain-concurrency", "64", "--delay", "0", "--allow-private-addresses"]
    argv += ["--state", str(run_dir / "state"), "--fresh", "-o", str(items)]
    if parsers is not None:
        argv += ["--parsers", str(parsers)]
    return argv


def run_once(
    tool: str,
    run: int,
    manifest: dict[str, Any],
    nginx: NginxServer,
    args: argparse.Namespace,
) -> RunResult:
    run_dir = WORK / "runs" / f"{tool}-{run}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    argv = command(tool, manifest["seeds"], run_dir, args.parsers)
    nginx.clear_log()
    busy_before_s = busy_cpu_s()
    usage = run_measured(argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log")
    others_cpu_s = busy_cpu_s() - busy_before_s - usage.cpu_s
    shutil.copy(nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(nginx.access_log), run_dir / "items.jsonl")
    disk = state_bytes(run_dir / "state")
    result = RunResult(tool, run, usage, verdict, others_cpu_s, disk)
    record = {"tool": tool, "run": run, "others_cpu_s": others_cpu_s, "state_bytes": disk}
    record |= {"usage": asdict(usage), "verdict": asdict(verdict)}
    (run_dir / "result.json").write_text(json.dumps(record, indent=1))
    status = "TIMED OUT" if usage.timed_out else f"exit {usage.exit_code}"
    print(
        f"{tool:10} run {run}: {verdict.responses} responses in {usage.wall_s:.1f} s = "
        f"{result.pages_per_s:.0f} pages/s, {usage.cpu_s:.1f} CPU s "
        f"({result.cpu_ms_per_page:.2f} ms/page), peak RSS {usage.peak_rss_mb:.0f} MB, {status}, "
        f"{others_cpu_s:.1f} CPU s used by nginx and other processes meanwhile"
        f"\n{'':12}{'OK' if verdict.ok else 'CHECK FAILED'}: {verdict.summary()}"
        + "".join(f"\n{'':14}{e}" for e in verdict.examples)
        + "".join(
            f"\n{'':12}state on disk: {name} {size / 1e6:.1f} MB" for name, size in disk.items()
        ),
        flush=True,
    )
    return result


def median(results: list[RunResult], tool: str, key: str) -> float:
    return statistics.median(getattr_path(r, key) for r in results if r.tool == tool)


def getattr_path(result: RunResult, key: str) -> float:
    value: Any = result
    for part in key.split("."):
        value = getattr(value, part)
    return float(value)


def table(results: list[RunResult], tools: list[str]) -> str:
    rows = [
        ("pages/s", "pages_per_s", "{:.0f}", "≥ 10x"),
        ("distinct pages/s", "distinct_per_s", "{:.0f}", ""),
        ("CPU ms per page", "cpu_ms_per_page", "{:.2f}", "≤ 0.1x"),
        ("peak RSS MB", "usage.peak_rss_mb", "{:.0f}", "≤ 1x"),
        ("wall s", "usage.wall_s", "{:.1f}", ""),
        ("CPU s", "usage.cpu_s", "{:.1f}", ""),
        ("responses", "verdict.responses", "{:.0f}", ""),
        ("CPU s used meanwhile by nginx + others", "others_cpu_s", "{:.1f}", ""),
        ("state on disk MB (crawlfleet)", "state_mb", "{:.0f}", ""),
    ]
    both = set(TOOLS) <= set(tools)
    head = "| metric (median of runs) | " + " | ".join(tools)
    head += " | crawlfleet / Scrapy | target |" if both else " |"
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for label, key, fmt, target in rows:
        values = {t: median(results, t, key) for t in tools}
        cells = [fmt.format(values[t]) for t in tools]
        if both:
            ratio = values["crawlfleet"] / values["scrapy"] if values["scrapy"] else None
            met = verdict_mark(key, ratio) if target and ratio is not None else ""
            # No ratio for others' CPU (not the crawlers' own) or against a zero (Scrapy keeps
            # no state on disk).
            shown = "" if key == "others_cpu_s" or ratio is None else f"{ratio:.2f}x"
            cells += [shown, f"{target} {met}".strip()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for tool in tools:
        runs = [r for r in results if r.tool == tool]
        checks = "; ".join(
            f"run {r.run}: {'OK' if r.verdict.ok else 'FAILED'} ({r.verdict.summary()})"
            for r in runs
        )
        lines.append(f"\n**{tool} checks**: {checks}")
    return "\n".join(lines)


def verdict_mark(key: str, ratio: float) -> str:
    goals = {"pages_per_s": ratio >= 10, "cpu_ms_per_page": ratio <= 0.1}  # issue 11
    return "met" if goals.get(key, ratio <= 1) else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18411)
    parser.add_argument("--site", type=Path, default=WORK / "site", help="regenerated if unfit")
    parser.add_argument("--small-pages", action="store_true", help="2-3 KB product pages")
    parser.add_argument(
        "--docs", action="store_true", help="the docs-like site of large pages (gen_docs.py)"
    )
    parser.add_argument(
        "--gzip", action="store_true", help="nginx sends HTML gzip-compressed (level 1)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per crawl run")
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument("--parsers", type=Path, default=BENCH / "bench_parsers.py")
    parser.add_argument("--results", type=Path, default=BENCH / "RESULTS.md")
    parser.add_argument("--no-results", action="store_true", help="print only")
    args = parser.parse_args()
    if not args.parsers.exists():
        args.parsers = None
    if "scrapy" in args.tools and not SCRAPY_PYTHON.exists():
        sys.exit(f"no Scrapy venv at {SCRAPY_PYTHON}; see bench/README.md")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so nginx is stopped on the way out
    machine = describe_machine()  # before the runs: the commit they measure
    site = WORK / "docs-site" if args.docs and args.site == WORK / "site" else args.site
    manifest = ensure_site(
        site, args.pages, args.hosts, args.port, small=args.small_pages, docs=args.docs
    )
    results: list[RunResult] = []
    hosts = list(manifest["hosts"])
    with NginxServer(site, WORK / "nginx", hosts, args.port, gzip=args.gzip) as nginx:
        for run in range(1, args.runs + 1):
            for tool in args.tools:
                results.append(run_once(tool, run, manifest, nginx, args))
    text = table(results, args.tools)
    print("\n" + text)
    if not args.no_results:
        rerun = "    .venv/bin/python bench/crawl_bench.py " + " ".join(sys.argv[1:])
        parsers = args.parsers.relative_to(REPO) if args.parsers else "the default parser"
        shape = (
            f"{args.pages} pages of ~100 KB on one host, each linking every page (bench/gen_docs.py"
            if args.docs
            else f"{args.pages} pages on {args.hosts} hosts (bench/gen_site.py"
        )
        body = (
            f"## Crawl{' (docs-like site)' if args.docs else ''}: crawlfleet embedded vs Scrapy\n\n"
            f"{machine}\n\nSite: {shape}, seed 1), served by a private nginx"
            f"{' sending HTML gzip-compressed' if args.gzip else ''}; both crawlers with 64 "
            f"concurrent requests overall and per host, no delay, robots.txt obeyed; crawlfleet "
            f"with {parsers}. Runs alternate, one crawler at a time.\n\n"
            f"{text}\n\nRerun:\n\n{rerun.rstrip()}\n"
        )
        write_section(args.results, "crawl-docs" if args.docs else "crawl", body)
        print(f"\nwrote {args.results}")


if __name__ == "__main__":
    main()
