"""Browser benchmark: crawlfleet's browser fetcher against Crawlee for Python's PlaywrightCrawler.

Both crawl the demo site's jsapp pages (``/``, ``/list/2..3``, ``/items/1..60``: content and
links written by script) with the same Debian Chromium (/usr/bin/chromium, same flags), the
same number of concurrent pages, images/fonts/media blocked. The demo site runs in this
process with its access log in a file; each crawler runs as a subprocess, alone, and
alternately ``--runs`` times. Per run: pages/s (page responses in the access log / wall
seconds), peak memory (the summed RSS of the crawler's whole process tree: Python,
Playwright's driver, every Chromium process, sampled every 50 ms), and a check that every
expected page was fetched and every item extracted.

Crawlee runs in its own venv: ``python3 -m venv bench/_work/crawlee-venv &&
bench/_work/crawlee-venv/bin/pip install 'crawlee[playwright]==1.11.0'``.

    .venv/bin/python bench/browser_bench.py --runs 3 --pages 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from results import write_section

from crawlfleet.demosite import ThreadedDemoSite, read_access_log
from crawlfleet.demosite.jsapp import JS_ITEMS, JS_LISTS

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "browser"
CRAWLEE_PYTHON = BENCH / "_work" / "crawlee-venv" / "bin" / "python"
CRAWLFLEET = Path(sys.executable).parent / "crawlfleet"
PARSERS = REPO / "examples" / "jsapp" / "parsers.py"
EXPECTED = {"/", *(f"/list/{n}" for n in range(2, JS_LISTS + 1))} | {
    f"/items/{n}" for n in range(1, JS_ITEMS + 1)
}
TOOLS = ("crawlfleet", "crawlee")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Run:
    tool: str
    wall_s: float
    pages: int
    missing: int
    duplicates: int
    items: int
    peak_mb: float
    exit_code: int

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s


def tree_rss_bytes(root: int) -> int:
    """Summed RSS of ``root`` and all its descendants."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            statm = (entry / "statm").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(stat[stat.rindex(")") + 2 :].split()[1])
        rss[pid] = int(statm.split()[1]) * PAGE_BYTES
    tree = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(rss.get(pid, 0) for pid in tree)


def command(tool: str, seed: str, run_dir: Path, pages: int) -> list[str]:
    items = run_dir / "items.jsonl"
    if tool == "crawlee":
        return [
            str(CRAWLEE_PYTHON),
            str(BENCH / "crawlee_browser.py"),
            "--out",
            str(items),
            "--pages",
            str(pages),
            seed,
        ]
    config = run_dir / "crawl.toml"
    config.write_text(
        "[crawl]\n"
        f"browser_pages = {pages}\n"
        f"per_domain_concurrency = {pages}\n"
        "delay_s = 0\n"
        "allow_private_addresses = true\n"
        "obey_robots = false\n"
    )
    return [
        str(CRAWLFLEET),
        "crawl",
        seed,
        "--config",
        str(config),
        "--parsers",
        str(PARSERS),
        "--state",
        str(run_dir / "state"),
        "-o",
        str(items),
    ]


def run_one(tool: str, site: ThreadedDemoSite, log_path: Path, run_dir: Path, pages: int) -> Run:
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    before = len(read_access_log(log_path)) if log_path.exists() else 0
    argv = command(tool, site.url("jsapp", "/"), run_dir, pages)
    env = {**os.environ, "CRAWLEE_STORAGE_DIR": str(run_dir / "crawlee-storage")}
    peak = 0
    started = time.monotonic()
    with (run_dir / "output.log").open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=run_dir)
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                peak = max(peak, tree_rss_bytes(process.pid))
                stop.wait(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = process.wait(timeout=600)
        wall_s = time.monotonic() - started
        stop.set()
        sampler.join()
    records = read_access_log(log_path)[before:]
    paths = [r.path for r in records if r.role == "jsapp" and r.path != "/robots.txt"]
    page_paths = [p for p in paths if p in EXPECTED]
    items_file = run_dir / "items.jsonl"
    items = len(items_file.read_text().splitlines()) if items_file.exists() else 0
    return Run(
        tool=tool,
        wall_s=wall_s,
        pages=len(page_paths),
        missing=len(EXPECTED - set(page_paths)),
        duplicates=len(page_paths) - len(set(page_paths)),
        items=items,
        peak_mb=peak / 1024 / 1024,
        exit_code=code,
    )


def table(runs: list[Run], label: str, pages: int) -> str:
    lines = [
        f"{label}; {len(EXPECTED)} JS pages, {JS_ITEMS} items, {pages} concurrent pages,"
        " Debian Chromium for both",
        "",
        "| tool | runs | pages/s (median) | peak memory MB (median) | wall s | missing | items |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tool in TOOLS:
        mine = [r for r in runs if r.tool == tool]
        if not mine:
            continue
        lines.append(
            f"| {tool} | {len(mine)} | {statistics.median(r.pages_per_s for r in mine):.2f} | "
            f"{statistics.median(r.peak_mb for r in mine):.0f} | "
            f"{statistics.median(r.wall_s for r in mine):.1f} | "
            f"{max(r.missing for r in mine)} | {min(r.items for r in mine)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pages", type=int, default=4, help="concurrent pages (both tools)")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--label", default="", help="e.g. 'loaded machine'")
    parser.add_argument("--write", action="store_true", help="write the table to RESULTS.md")
    args = parser.parse_args()
    tools = [t for t in args.tools.split(",") if t]
    WORK.mkdir(parents=True, exist_ok=True)
    log_path = WORK / "access.jsonl"
    log_path.unlink(missing_ok=True)
    runs: list[Run] = []
    with ThreadedDemoSite(access_log_path=log_path) as site:
        for number in range(args.runs):
            for tool in tools:
                run = run_one(tool, site, log_path, WORK / f"{tool}-{number}", args.pages)
                runs.append(run)
                print(json.dumps(run.__dict__ | {"pages_per_s": round(run.pages_per_s, 2)}))
                if run.exit_code != 0 or run.missing:
                    print(f"{tool} run {number}: exit {run.exit_code}, {run.missing} missing")
    label = args.label or "machine state not given"
    text = table(runs, label, args.pages)
    print(text)
    if args.write:
        write_section(BENCH / "RESULTS.md", "browser", text)


if __name__ == "__main__":
    main()
