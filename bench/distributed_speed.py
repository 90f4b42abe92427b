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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fixtures
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench's flat imports

import psycopg
import redis
from crawl_bench import ensure_site
from machine import busy_cpu_s, describe_machine
from measure import descendants, high_water_mb, run_measured
from nginx_server import NginxServer, read_log
from verify import Verdict, verify

from crawlfleet.frontier.store_types import LEASE_EXPIRED
from tests.fixtures.postgres_server import PostgresServer, _bindir
from tests.fixtures.redis_server import RedisServer

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work" / "distributed_speed"
BIN = Path(sys.executable).parent
CRAWLFLEET = BIN / "crawlfleet"
SCRAPY_PYTHON = BENCH / "_work" / "scrapy-venv" / "bin" / "python"
PARSERS = BENCH / "bench_parsers.py"
MODES = ("embedded", "dist1", "dist2", "dist4", "kill2", "scrapy-redis2")
FLAGS = ["--concurrency", "64", "--per-domain-concurrency", "64"]
FLAGS += ["--allow-private-addresses", "--parsers", str(PARSERS)]
TICKS = os.sysconf("SC_CLK_TCK")
KILLS = 3


def switches(pid: int) -> tuple[int, int]:
    """Context switches of ``pid`` so far: voluntary (it waited), involuntary (preempted)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return (0, 0)
    fields = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    return int(fields["voluntary_ctxt_switches"]), int(fields["nonvoluntary_ctxt_switches"])


def proc_cpu_s(pid: int, *, children: bool = False) -> float:
    """CPU seconds of ``pid`` (user + sys), with its reaped children's when asked; 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / TICKS


@dataclass
class Services:
    redis: RedisServer
    postgres: PostgresServer
    nginx: NginxServer
    redis_pid: int
    postmaster_pid: int

    def cpu_s(self) -> tuple[float, float]:
        """CPU of redis-server, and of PostgreSQL (postmaster, live and reaped backends)."""
        pg = proc_cpu_s(self.postmaster_pid, children=True)
        pg += sum(proc_cpu_s(p) for p in descendants(self.postmaster_pid)[1:])
        return proc_cpu_s(self.redis_pid, children=True), pg


@dataclass
class Run:
    mode: str
    run: int
    wall_s: float
    crawler_cpu_s: float  # workers + dispatcher, or the embedded / scrapy processes
    redis_cpu_s: float
    postgres_cpu_s: float
    verdict: Verdict
    others_cpu_s: float
    worker_rss_mb: list[float] = field(default_factory=list)
    expired: int = 0
    commands: dict[str, int] = field(default_factory=dict)
    redis_usec: int = 0
    dispatcher_cpu_s: float = 0.0
    postgres_commits: int = 0
    redis_reads: int = 0  # socket reads Redis served: about one per round trip
    worker_switches: tuple[int, int] = (0, 0)  # voluntary, involuntary: every worker's
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


class Worker:
    """One ``crawlfleet worker`` process; its CPU counts from when it said ready."""

    def __init__(self, run_dir: Path, n: int, redis_url: str, dsn: str) -> None:
        self.log_path = run_dir / f"worker-{n}.log"
        self._log = self.log_path.open("wb")
        argv = [str(CRAWLFLEET), "worker", "--redis", redis_url, "--postgres", dsn]
        argv += ["--concurrency", "64", "--parsers", str(PARSERS), "--loglevel", "INFO"]
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        self.start_cpu_s = 0.0
        self.cpu_s = 0.0
        self.start_switches = (0, 0)
        self.switches = (0, 0)
        self.rss_mb = 0.0

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while "ready." not in self.log_path.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker did not start; see {self.log_path}")
            time.sleep(0.05)
        self.start_cpu_s = proc_cpu_s(self.process.pid)
        self.start_switches = switches(self.process.pid)

    def sample(self) -> None:
        self.cpu_s = proc_cpu_s(self.process.pid) - self.start_cpu_s
        now = switches(self.process.pid)
        if now != (0, 0):  # still running
            self.switches = (now[0] - self.start_switches[0], now[1] - self.start_switches[1])
        self.rss_mb = high_water_mb(self.process.pid)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.sample()
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def run_distributed(
    mode: str,
    run: int,
    args: argparse.Namespace,
    manifest: dict[str, Any],
    svc: Services,
    tag: str = "",
) -> Run:
    n_workers = int(mode[-1])
    kills = KILLS if mode.startswith("kill") else 0
    run_dir = fresh_dir(f"{mode}-{run}{tag}")
    database = f"{mode}_{run}{tag}".replace("-", "_")
    svc.postgres.psql(f"CREATE DATABASE {database}")
    dsn = svc.postgres.dsn(database)
    workers = [Worker(run_dir, n, svc.redis.url, dsn) for n in range(n_workers)]
    for worker in workers:
        worker.wait_ready()
    client = redis.Redis.from_url(svc.redis.url)
    client.config_resetstat()
    svc.nginx.clear_log()
    commits_before = commits(dsn, database)
    spy = None
    if args.profile:  # py-spy on the first worker; its CPU then counts py-spy's pauses too
        spy_argv = [str(BIN / "py-spy"), "record", "--pid", str(workers[0].process.pid)]
        spy_argv += ["--rate", "200", "--format", "raw", "-o", str(run_dir / "worker-0.txt")]
        spy = subprocess.Popen(spy_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    crawl_id = f"speed-{mode}-{run}{tag}"
    argv = [str(CRAWLFLEET), "crawl", *manifest["seeds"], *FLAGS, "--delay", str(args.delay_s)]
    argv += ["--redis", svc.redis.url, "--postgres", dsn, "--crawl-id", crawl_id, "--fresh"]
    if args.profile:
        spy_argv = [str(BIN / "py-spy"), "record", "--rate", "200", "--format", "raw"]
        argv = [*spy_argv, "-o", str(run_dir / "dispatcher.txt"), "--", *argv]
    services_before = svc.cpu_s()
    busy_before = busy_cpu_s()
    dispatcher = subprocess.Popen(
        argv,
        stdout=(run_dir / "dispatcher.log").open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **lease_env(args)},
    )
    started = time.monotonic()
    killed: list[Worker] = []
    next_kill = started + args.kill_every_s
    while True:
        pid, status, usage = os.wait4(dispatcher.pid, os.WNOHANG)
        if pid:
            break
        if kills and time.monotonic() >= next_kill:
            victim = workers[len(killed) % len(workers)]
            victim.stop(signal.SIGKILL)
            killed.append(victim)
            workers[workers.index(victim)] = replacement = Worker(
                run_dir, n_workers + len(killed) - 1, svc.redis.url, dsn
            )
            replacement.wait_ready()
            kills -= 1
            next_kill = time.monotonic() + args.kill_every_s
        time.sleep(0.02)
    wall_s = time.monotonic() - started
    dispatcher.returncode = os.waitstatus_to_exitcode(status)
    for worker in workers:
        worker.sample()
    redis_cpu_s, postgres_cpu_s = (b - a for a, b in zip(services_before, svc.cpu_s(), strict=True))
    services_cpu_s = redis_cpu_s + postgres_cpu_s
    dispatcher_cpu_s = usage.ru_utime + usage.ru_stime
    workers_cpu_s = sum(w.cpu_s for w in [*workers, *killed])
    others_cpu_s = busy_cpu_s() - busy_before - dispatcher_cpu_s - workers_cpu_s - services_cpu_s
    stats = client.info("commandstats")
    redis_reads = int(client.info("stats")["total_reads_processed"])
    for worker in workers:
        worker.stop()
    postgres_commits = commits(dsn, database) - commits_before
    if spy is not None:
        spy.wait(timeout=60)
    if dispatcher.returncode != 0:
        print(f"  dispatcher exit {dispatcher.returncode}; see {run_dir}", flush=True)
    items = run_dir / "items.jsonl"
    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT data FROM items WHERE crawl_id = %s", [crawl_id]).fetchall()
        expired = db.execute(
            "SELECT count(*) FROM attempts WHERE crawl_id = %s AND error = %s",
            [crawl_id, LEASE_EXPIRED],
        ).fetchone()
    items.write_text("".join(json.dumps({**r[0], "type": "product"}) + "\n" for r in rows))
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), items)
    commands = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    usec = sum(int(v["usec"]) for v in stats.values())
    client.close()
    return Run(
        mode,
        run,
        wall_s,
        dispatcher_cpu_s + workers_cpu_s,
        redis_cpu_s,
        postgres_cpu_s,
        verdict,
        others_cpu_s,
        worker_rss_mb=[w.rss_mb for w in [*workers, *killed]],
        expired=int(expired[0]) if expired else 0,
        commands=commands,
        redis_usec=usec,
        dispatcher_cpu_s=dispatcher_cpu_s,
        postgres_commits=postgres_commits,
        redis_reads=redis_reads,
        worker_switches=(
            sum(w.switches[0] for w in [*workers, *killed]),
            sum(w.switches[1] for w in [*workers, *killed]),
        ),
    )


def commits(dsn: str, database: str) -> int:
    """Transactions committed in ``database`` so far (as the statistics have them)."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("SELECT pg_stat_clear_snapshot()")
        row = db.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [database]
        ).fetchone()
    return int(row[0]) if row else 0


def lease_env(args: argparse.Namespace) -> dict[str, str]:
    return {"CRAWLFLEET_LEASE_S": str(args.lease_s)} if args.lease_s else {}


def run_embedded(
    run: int, args: argparse.Namespace, manifest: dict[str, Any], svc: Services, tag: str = ""
) -> Run:
    run_dir = fresh_dir(f"embedded-{run}{tag}")
    argv = [str(CRAWLFLEET), "crawl", *manifest["seeds"], *FLAGS, "--delay", str(args.delay_s)]
    argv += ["--state", str(run_dir / "state"), "--fresh", "-o", str(run_dir / "items.jsonl")]
    svc.nginx.clear_log()
    busy_before = busy_cpu_s()
    usage = run_measured(argv, timeout_s=args.timeout_s, log_path=run_dir / "output.log")
    others = busy_cpu_s() - busy_before - usage.cpu_s
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), run_dir / "items.jsonl")
    return Run(
        "embedded", run, usage.wall_s, usage.cpu_s, 0.0, 0.0, verdict, others,
        worker_rss_mb=[usage.peak_rss_mb],
    )  # fmt: skip


def run_scrapy_redis(
    run: int, args: argparse.Namespace, manifest: dict[str, Any], svc: Services, tag: str = ""
) -> Run:
    run_dir = fresh_dir(f"scrapy-redis2-{run}{tag}")
    client = redis.Redis.from_url(svc.redis.url)
    key = f"scrapyredis{run}{tag}"
    client.delete(f"{key}:requests", f"{key}:dupefilter", f"{key}:start_urls")
    client.rpush(f"{key}:start_urls", *(json.dumps({"url": s}) for s in manifest["seeds"]))
    client.config_resetstat()
    svc.nginx.clear_log()
    hosts = sorted(manifest["hosts"])
    services_before = svc.cpu_s()
    busy_before = busy_cpu_s()
    started_wall = time.time()
    started = time.monotonic()
    processes = []
    for n in range(2):
        argv = [str(SCRAPY_PYTHON), str(BENCH / "scrapy_redis_spider.py")]
        argv += ["--out", str(run_dir / f"items-{n}.jsonl"), "--redis", svc.redis.url]
        argv += ["--key", key, "--idle-s", str(args.idle_s), *hosts]
        log = (run_dir / f"scrapy-{n}.log").open("wb")
        processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    usages = [os.wait4(p.pid, 0)[2] for p in processes]
    process_wall_s = time.monotonic() - started
    redis_cpu_s, postgres_cpu_s = (b - a for a, b in zip(services_before, svc.cpu_s(), strict=True))
    services_cpu_s = redis_cpu_s + postgres_cpu_s
    cpu_s = sum(u.ru_utime + u.ru_stime for u in usages)
    others = busy_cpu_s() - busy_before - cpu_s - services_cpu_s
    stats = client.info("commandstats")
    client.close()
    raw = svc.nginx.access_log.read_text(errors="replace").splitlines()
    last_s = max(float(line.split("\t")[0]) for line in raw) if raw else started_wall
    wall_s = min(process_wall_s, last_s - started_wall)
    items = run_dir / "items.jsonl"
    items.write_text("".join((run_dir / f"items-{n}.jsonl").read_text() for n in range(2)))
    shutil.copy(svc.nginx.access_log, run_dir / "access.log")
    verdict = verify(manifest, read_log(svc.nginx.access_log), items)
    commands = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
    return Run(
        "scrapy-redis2", run, wall_s, cpu_s, redis_cpu_s, postgres_cpu_s, verdict, others,
        worker_rss_mb=[u.ru_maxrss / 1024 for u in usages], commands=commands,
        redis_usec=sum(int(v["usec"]) for v in stats.values()),
    )  # fmt: skip


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
        return run_scrapy_redis(run, args, manifest, svc, tag)
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
    bindir = _bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found")
    shutil.rmtree(WORK / "redis", ignore_errors=True)  # no AOF of an earlier run to load
    redis_server = RedisServer(WORK / "redis", extra_args=("--appendfsync", "everysec"))
    postgres = PostgresServer(bindir)
    nginx = NginxServer(site, WORK / "nginx", list(manifest["hosts"]), manifest["port"])
    redis_server.start()
    postgres.init()
    nginx.start()
    with redis.Redis.from_url(redis_server.url) as client:
        redis_pid = int(client.info("server")["process_id"])
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    return Services(redis_server, postgres, nginx, redis_pid, postmaster)


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
        svc.nginx.stop()
        svc.postgres.destroy()
        svc.redis.stop()
    print("\n" + table(runs, args.modes))


if __name__ == "__main__":
    main()
