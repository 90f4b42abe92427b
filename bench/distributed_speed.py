"""Distributed speed and recovery: crawlfleet embedded, distributed (1/2/4 workers, kills) and
scrapy-redis, side by side on one site, in one run.

Starts the generated static site (``gen_site.py``) behind a private nginx, a private
redis-server (AOF, ``appendfsync everysec``) and a private PostgreSQL, then runs each mode
once per ``--runs``, one at a time:

- ``embedded``: ``crawlfleet crawl`` (SQLite state), the crawl benchmark's command;
- ``dist1``, ``dist2``, ``dist4``: N ``crawlfleet worker --concurrency 64`` processes and the
  dispatcher ``crawlfleet crawl --redis --postgres``;
- ``kill2``: ``dist2`` with a worker SIGKILLed every ``--kill-every-s`` seconds, three times,
  each replaced by a new worker at once;
- ``scrapy-redis2``: two scrapy-redis processes sharing the scheduler and dupefilter in the
  same redis-server (``scrapy_redis_spider.py``, the Scrapy venv of ``bench/README.md``).

Per run: pages/s (responses in nginx's log / wall seconds), CPU seconds of the whole system
(crawler processes, and for the Redis modes redis-server and every PostgreSQL process, from
``/proc``), CPU ms per page, peak RSS of each worker process, Redis commands per page
(``INFO commandstats``) and round trips (``total_reads_processed``), PostgreSQL commits and
pages per commit, the workers' context switches (voluntary, and involuntary: preempted, a
sign of a machine with more runnable processes than cores), expired leases (attempts ``lease expired`` in PostgreSQL: false
expiries without kills; with kills, the leases the killed workers held), and the
access-log check of ``verify.py`` (every expected path once, nothing disallowed, every
product stored; with kills, refetches up to the expired leases). Wall time of scrapy-redis
ends at its last response (its processes then idle ``--idle-s`` before they close), which
favours it.

    .venv/bin/python bench/distributed_speed.py --pages 4000

``--delay-s D`` sets crawlfleet's per-domain delay (the modes then run at the same rate, below
what the machine can do, so none saturates the cores; scrapy-redis keeps no delay).

``--src A/src B/src`` compares trees (e.g. a worktree of main and a branch): each run runs
every mode of A, then of B, so the machine's load falls on both alike; one table per tree.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench's flat imports

from crawl_bench import ensure_site
from distributed_runs import KILLS, Cluster, Measured, Services, run_cluster, run_scrapy_redis
from distributed_runs import start_services as start_cluster_services
from machine import busy_cpu_s, describe_machine
from measure import run_measured
from nginx_server import NginxServer, read_log
from verify import Verdict, verify

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "distributed_speed"
BIN = Path(sys.executable).parent
CRAWLFLEET = BIN / "crawlfleet"
SCRAPY_PYTHON = BENCH / "_work" / "scrapy-venv" / "bin" / "python"
PARSERS = BENCH / "bench_parsers.py"
MODES = ("embedded", "dist1", "dist2", "dist4", "kill2", "scrapy-redis2")
FLAGS = ["--concurrency", "64", "--per-domain-concurrency", "64", "--allow-private-addresses"]


@dataclass(kw_only=True)
class Run(Measured):
    mode: str
    run: int
    verdict: Verdict
    tree: str = ""  # which ``--src`` tree ran, when several are compared

    @property
    def ok(self) -> bool:
        """The access-log check; with kills, refetches up to the leases the kills left."""
        if not self.mode.startswith("kill"):
            return self.verdict.ok
        rest = dataclasses.replace(self.verdict, duplicates=0)
        return rest.ok and self.verdict.duplicates <= self.expired

    @property
    def pages(self) -> int:
        return self.verdict.responses

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s

    @property
    def services_cpu_s(self) -> float:
        return self.redis_cpu_s + self.postgres_cpu_s

    @property
    def cpu_s(self) -> float:
        return self.crawler_cpu_s + self.services_cpu_s

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_s / max(1, self.pages)


def run_distributed(
    mode: str,
    run: int,
    args: argparse.Namespace,
    manifest: dict[str, Any],
    svc: Services,
    tag: str = "",
) -> Run:
    run_dir = fresh_dir(f"{mode}-{run}{tag}")
    env = {"CRAWLFLEET_LEASE_S": str(args.lease_s)} if args.lease_s else {}
    cluster = Cluster([str(CRAWLFLEET)], PARSERS, env, BIN / "py-spy" if args.profile else None)
    crawl_args = [*manifest["seeds"], *FLAGS, "--delay", str(args.delay_s)]
    measured, rows = run_cluster(
        cluster,
        svc,
        run_dir,
        f"{mode}-{run}{tag}",
        crawl_args,
        workers=int(mode[-1]),
        kills=KILLS if mode.startswith("kill") else 0,
        kill_every_s=args.kill_every_s,
        timeout_s=args.timeout_s,
    )
    if measured.exit_code != 0:
        print(f"  dispatcher exit {measured.exit_code}; see {run_dir}", flush=True)
    items = run_dir / "items.jsonl"
    items.write_text("".join(json.dumps({**r, "type": "product"}) + "\n" for r in rows))
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), items)
    return Run(**vars(measured), mode=mode, run=run, verdict=verdict)


def run_embedded(
    run: int, args: argparse.Namespace, manifest: dict[str, Any], svc: Services, tag: str = ""
) -> Run:
    run_dir = fresh_dir(f"embedded-{run}{tag}")
    argv = [str(CRAWLFLEET), "crawl", *manifest["seeds"], *FLAGS, "--delay", str(args.delay_s)]
    argv += ["--parsers", str(PARSERS)]
    argv += ["--state", str(run_dir / "state"), "--fresh", "-o", str(run_dir / "items.jsonl")]
    svc.nginx.clear_log()
    busy_before = busy_cpu_s()
    usage = run_measured(argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log")
    others = busy_cpu_s() - busy_before - usage.cpu_s
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), run_dir / "items.jsonl")
    return Run(
        usage.wall_s, usage.cpu_s, 0.0, 0.0, others, worker_rss_mb=[usage.peak_rss_mb],
        mode="embedded", run=run, verdict=verdict,
    )  # fmt: skip


def run_scrapy_redis2(
    run: int, args: argparse.Namespace, manifest: dict[str, Any], svc: Services, tag: str = ""
) -> Run:
    run_dir = fresh_dir(f"scrapy-redis2-{run}{tag}")
    spider = [str(SCRAPY_PYTHON), str(BENCH / "scrapy_redis_spider.py")]
    spider += ["--idle-s", str(args.idle_s), *sorted(manifest["hosts"])]
    measured = run_scrapy_redis(
        spider, svc, run_dir, f"scrapyredis{run}{tag}", manifest["seeds"], timeout_s=args.timeout_s
    )
    items = run_dir / "items.jsonl"
    items.write_text("".join((run_dir / f"items-{n}.jsonl").read_text() for n in range(2)))
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), items)
    return Run(**vars(measured), mode="scrapy-redis2", run=run, verdict=verdict)


def fresh_dir(name: str) -> Path:
    path = WORK / "runs" / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def run_mode(
    mode: str,
    run: int,
    args: argparse.Namespace,
    manifest: dict[str, Any],
    svc: Services,
    tag: str = "",
) -> Run:
    """One run of ``mode``; ``tag`` keeps apart the names (directory, database, crawl id)
    of runs of several trees."""
    if mode == "embedded":
        return run_embedded(run, args, manifest, svc, tag)
    if mode == "scrapy-redis2":
        return run_scrapy_redis2(run, args, manifest, svc, tag)
    return run_distributed(mode, run, args, manifest, svc, tag)


def describe(r: Run) -> str:
    top = sorted(r.commands.items(), key=lambda kv: -kv[1])[:6]
    per_page = ", ".join(f"{k} {v / max(1, r.pages):.2f}" for k, v in top)
    text = (
        f"{r.mode:13} run {r.run}{' of ' + r.tree if r.tree else ''}: {r.pages} responses in {r.wall_s:.1f} s = "
        f"{r.pages_per_s:.0f} pages/s; CPU {r.crawler_cpu_s:.1f} s crawler + "
        f"{r.redis_cpu_s:.1f} s Redis + {r.postgres_cpu_s:.1f} s PostgreSQL = "
        f"{r.cpu_ms_per_page:.2f} ms/page "
        f"(dispatcher {r.dispatcher_cpu_s:.1f} s); "
        f"RSS {', '.join(f'{m:.0f}' for m in r.worker_rss_mb)} MB; "
        f"{r.others_cpu_s:.1f} CPU s used by others meanwhile"
    )
    if r.commands:
        text += f"\n{'':16}Redis per page: {per_page}; {r.redis_usec / max(1, r.pages):.0f} µs"
        text += f"; {r.redis_reads / max(1, r.pages):.2f} reads (round trips)"
    if r.mode != "embedded" and not r.mode.startswith("scrapy"):
        per_commit = r.pages / max(1, r.postgres_commits)
        text += f"\n{'':16}PostgreSQL: {r.postgres_commits} commits, {per_commit:.1f} pages each"
        voluntary, preempted = r.worker_switches
        text += f"\n{'':16}workers' context switches: {voluntary} voluntary, {preempted} preempted"
        text += f"\n{'':16}expired leases: {r.expired}"
    ok = "OK" if r.ok else "CHECK FAILED"
    text += f"\n{'':16}{ok}: {r.verdict.summary()}"
    return text + "".join(f"\n{'':18}{e}" for e in r.verdict.examples)


def table(all_runs: list[Run], modes: list[str]) -> str:
    """One table per tree; ratios to that tree's embedded runs."""
    trees = list(dict.fromkeys(r.tree for r in all_runs))
    return "\n\n".join(
        (f"{tree}:\n" if tree else "") + tree_table([r for r in all_runs if r.tree == tree], modes)
        for tree in trees
    )


def tree_table(runs: list[Run], modes: list[str]) -> str:
    def med(mode: str, key: str) -> float:
        return statistics.median(float(getattr(r, key)) for r in runs if r.mode == mode)

    base = (
        {k: med("embedded", k) for k in ("pages_per_s", "cpu_ms_per_page")}
        if ("embedded" in modes)
        else {}
    )
    lines = [
        "| mode | pages/s | x embedded | CPU ms/page (all processes) | x embedded "
        "| peak RSS per process MB | expired leases | refetches | lost | check |",
        "|" + " --- |" * 10,
    ]
    for mode in modes:
        mine = [r for r in runs if r.mode == mode]
        pps, cpu = med(mode, "pages_per_s"), med(mode, "cpu_ms_per_page")
        rss = max(max(r.worker_rss_mb or [0.0]) for r in mine)
        ratio_p = f"{pps / base['pages_per_s']:.2f}" if base else ""
        ratio_c = f"{cpu / base['cpu_ms_per_page']:.2f}" if base else ""
        expired = (
            "/".join(str(r.expired) for r in mine) if mode.startswith(("dist", "kill")) else ""
        )
        dups = "/".join(str(r.verdict.duplicates) for r in mine)
        lost = "/".join(str(r.verdict.missed) for r in mine)
        check = "/".join("OK" if r.ok else "FAILED" for r in mine)
        lines.append(
            f"| {mode} | {pps:.0f} | {ratio_p} | {cpu:.2f} | {ratio_c} | {rss:.0f} | {expired} "
            f"| {dups} | {lost} | {check} |"
        )
    return "\n".join(lines)


def tree_label(src: Path) -> str:
    """A short name for a ``--src`` tree: its checkout's directory and commit."""
    checkout = src.resolve().parent
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    dirty = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    commit = done.stdout.strip() or "?"
    return f"{checkout.name}@{commit}{'+dirty' if dirty.stdout.strip() else ''}"


def start_services(site: Path, manifest: dict[str, Any]) -> Services:
    nginx = NginxServer(site, WORK / "nginx", list(manifest["hosts"]), manifest["port"])
    return start_cluster_services(WORK, nginx)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=4000)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--port", type=int, default=18412)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--kill-every-s", type=float, default=5.0)
    parser.add_argument("--lease-s", type=float, default=0.0, help="0: the crawl's default")
    parser.add_argument("--idle-s", type=int, default=3, help="scrapy-redis idle close")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--profile", action="store_true", help="py-spy the first worker")
    parser.add_argument(
        "--delay-s",
        type=float,
        default=0.0,
        help="crawlfleet's per-domain delay (not scrapy-redis's): a rate below the machine's "
        "capacity, so no mode saturates the cores",
    )
    parser.add_argument(
        "--src",
        type=Path,
        nargs="+",
        default=[REPO / "src"],
        help="crawlfleet tree(s) to run; with several, each run runs every mode of each tree "
        "in turn (A/B alternately)",
    )
    args = parser.parse_args()
    if "scrapy-redis2" in args.modes and not SCRAPY_PYTHON.exists():
        sys.exit(f"no Scrapy venv at {SCRAPY_PYTHON}; see bench/README.md")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    inherited = list(filter(None, [os.environ.get("PYTHONPATH")]))
    print(describe_machine(), flush=True)
    manifest = ensure_site(WORK / "site", args.pages, args.hosts, args.port)
    svc = start_services(WORK / "site", manifest)
    runs: list[Run] = []
    labels = [tree_label(src) for src in args.src]  # once: a commit during the runs keeps them
    try:
        for run in range(1, args.runs + 1):
            for index, src in enumerate(args.src):
                # every crawlfleet process of these runs imports this tree
                os.environ["PYTHONPATH"] = os.pathsep.join([str(src), *inherited])
                for mode in args.modes:
                    tag = f"-tree{index}" if len(args.src) > 1 else ""
                    result = run_mode(mode, run, args, manifest, svc, tag)
                    if len(args.src) > 1:
                        result.tree = labels[index]
                    print(describe(result), flush=True)
                    runs.append(result)
    finally:
        svc.stop()
    print("\n" + table(runs, args.modes))


if __name__ == "__main__":
    main()
