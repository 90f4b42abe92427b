"""Cost of the proxy pool: pages/s of an embedded crawl direct, through crawl sessions without a
proxy, and through one tinyproxy.

Same site, nginx and crawl command as ``crawl_bench.py`` (``--concurrency 64``, no delay); the
variants run alternately, ``--runs`` times each:

- ``direct``: no ``[crawl.proxies]`` (the HTTP fetcher alone);
- ``sessions``: ``tiers = [["direct"]]`` (crawl sessions, header profiles, cookie jars, the
  shared proxy state; no proxy);
- ``tinyproxy``: ``tiers = [["http://127.0.0.1:PORT"]]``, one private tinyproxy (Debian's)
  whose outgoing connections come from 127.0.1.50.

Exactness is checked from nginx's access log (``verify.py``: every page once, none missed);
for the proxied run every attempt of the state file must name the proxy.

    .venv/bin/python bench/proxy_bench.py --pages 4000 --runs 1
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

from crawl_bench import BENCH, REPO, WORK, command, ensure_site
from machine import busy_cpu_s, cpu_model
from measure import run_measured
from nginx_server import NginxServer, read_log
from results import write_section
from tinyproxy_server import TinyproxyServer
from verify import verify

VARIANTS = ("direct", "sessions", "tinyproxy")
PARSERS = BENCH / "bench_parsers.py"


def config_for(variant: str, run_dir: Path, proxy_url: str) -> list[str]:
    """The extra crawl arguments of ``variant`` (a config file with its tiers)."""
    if variant == "direct":
        return []
    tier = "direct" if variant == "sessions" else proxy_url
    config = run_dir / "crawl.toml"
    config.write_text(f'[crawl.proxies]\ntiers = [["{tier}"]]\nsessions_per_domain = 8\n')
    return ["--config", str(config)]


def describe() -> str:
    """Date, machine, commit and the servers' versions (no Scrapy in this benchmark)."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True, check=False)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"Date: {now}. Machine: {os.cpu_count()} CPUs ({cpu_model()}), {platform.system()} "
        f"{platform.release()}. crawlfleet at commit {commit} on Python "
        f"{platform.python_version()}; {nginx.stderr.strip()}; tinyproxy 1.11 (Debian)."
    )


def unrouted_attempts(state: Path) -> int:
    """Fetches in the state file's attempt log that went through no proxy (robots.txt skips,
    which fetch nothing, do not count)."""
    with sqlite3.connect(state / "state.sqlite") as db:
        return int(
            db.execute(
                "SELECT count(*) FROM attempts WHERE status IS NOT NULL"
                " AND (proxy_id IS NULL OR proxy_id = 'direct')"
            ).fetchone()[0]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18411)
    parser.add_argument("--site", type=Path, default=WORK / "site", help="regenerated if unfit")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=900.0, help="per crawl run")
    parser.add_argument("--loaded", action="store_true", help="label the figures: machine loaded")
    parser.add_argument("--no-results", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped
    manifest = ensure_site(args.site, args.pages, args.hosts, args.port)
    rates: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    cpu_ms: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    checks: list[str] = []
    os.environ["PYTHONPATH"] = str(REPO / "src")  # the crawls run this tree's crawlfleet
    with (
        NginxServer(args.site, WORK / "nginx", list(manifest["hosts"]), args.port) as nginx,
        TinyproxyServer(WORK / "tinyproxy", bind="127.0.1.50") as proxy,
    ):
        for run in range(1, args.runs + 1):
            for variant in VARIANTS:
                nginx.clear_log()
                run_dir = WORK / "runs" / f"proxy-{variant}-{run}"
                shutil.rmtree(run_dir, ignore_errors=True)
                run_dir.mkdir(parents=True)
                argv = [
                    sys.executable, "-m", "crawlfleet",
                    *command("crawlfleet", manifest["seeds"], run_dir, PARSERS)[1:],
                    *config_for(variant, run_dir, proxy.url),
                ]  # fmt: skip
                busy_before_s = busy_cpu_s()
                usage = run_measured(
                    argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log"
                )
                others_s = busy_cpu_s() - busy_before_s - usage.cpu_s
                verdict = verify(manifest, read_log(nginx.access_log), run_dir / "items.jsonl")
                ok = verdict.ok and usage.exit_code == 0
                if variant == "tinyproxy":
                    unrouted = unrouted_attempts(run_dir / "state")
                    ok = ok and unrouted == 0
                rate = verdict.responses / usage.wall_s
                rates[variant].append(rate)
                cpu_ms[variant].append(1000 * usage.cpu_s / max(1, verdict.responses))
                line = (
                    f"{variant}, run {run}: {verdict.responses} responses in {usage.wall_s:.1f} s"
                    f" = {rate:.0f} pages/s, {usage.cpu_s:.1f} CPU s (others {others_s:.1f}),"
                    f" exit {usage.exit_code}, {'OK' if ok else 'CHECK FAILED'}"
                    f" ({verdict.missed} missed, {verdict.duplicates} duplicates)"
                )
                checks.append(line)
                print(line, flush=True)
    medians = {variant: statistics.median(rates[variant]) for variant in VARIANTS}
    cpus = {variant: statistics.median(cpu_ms[variant]) for variant in VARIANTS}
    table = [
        "| variant | pages/s (median) | vs direct | crawler CPU ms per page | vs direct |",
        "| --- | --- | --- | --- | --- |",
    ]
    for variant in VARIANTS:
        table.append(
            f"| {variant} | {medians[variant]:.0f} | {medians[variant] / medians['direct']:.2f}x"
            f" | {cpus[variant]:.2f} | {cpus[variant] / cpus['direct']:.2f}x |"
        )
    print("\n" + "\n".join(table))
    if args.no_results:
        return
    load = (
        "**Machine loaded**: other sessions were running tests meanwhile; compare the ratios, "
        "not the absolute figures."
        if args.loaded
        else ""
    )
    body = "\n".join(
        [
            "## Proxies: pages/s direct vs crawl sessions vs one tinyproxy",
            "",
            describe(),
            "",
            f"Site: {args.pages} pages on {args.hosts} hosts (bench/gen_site.py) served by a "
            "private nginx; `crawlfleet crawl` with 64 concurrent requests, no delay; `sessions`"
            ' = `tiers = [["direct"]]`, `tinyproxy` = one Debian tinyproxy 1.11 (8 sessions a '
            "host). " + load,
            "",
            *table,
            "",
            "Runs: " + "; ".join(checks),
            "",
            "Rerun:",
            "",
            f"    .venv/bin/python bench/proxy_bench.py --pages {args.pages} --runs {args.runs}"
            + (" --loaded" if args.loaded else ""),
        ]
    )
    write_section(BENCH / "RESULTS.md", "proxies", body)


if __name__ == "__main__":
    main()
