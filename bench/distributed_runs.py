"""The distributed benchmarks' process management, shared by ``distributed_speed.py`` (the
generated shop) and ``corpus_bench.py`` (the documentation corpora).

A private redis-server (AOF, ``appendfsync everysec``), a private PostgreSQL and the private
nginx (``Services``); a crawlfleet cluster run (N ``crawlfleet worker`` processes and the
dispatcher ``crawlfleet crawl --redis --postgres``, optionally with workers SIGKILLed and
replaced) and a scrapy-redis run (two processes sharing scheduler and dupefilter). Each run
returns what it measured (``Measured``): wall seconds, CPU seconds of the whole system
(crawler processes, redis-server and every PostgreSQL process, from ``/proc``; a worker's from
when it said ready), peak RSS of each process, Redis commands and round trips, PostgreSQL
commits, the workers' context switches and expired leases. Checking the crawl against what it
should have fetched is the caller's (its access log is nginx's).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from machine import busy_cpu_s
from measure import descendants, high_water_mb
from nginx_server import NginxServer

from crawlfleet.frontier.store_types import LEASE_EXPIRED
from tests.fixtures.postgres_server import PostgresServer, _bindir
from tests.fixtures.redis_server import RedisServer

TICKS = os.sysconf("SC_CLK_TCK")
KILLS = 3  # workers SIGKILLed in a run with kills


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

    def stop(self) -> None:
        self.nginx.stop()
        self.postgres.destroy()
        self.redis.stop()


def start_services(work: Path, nginx: NginxServer) -> Services:
    """redis-server and PostgreSQL under ``work`` (no AOF of an earlier run), and ``nginx``."""
    bindir = _bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found")
    shutil.rmtree(work / "redis", ignore_errors=True)
    redis_server = RedisServer(work / "redis", extra_args=("--appendfsync", "everysec"))
    postgres = PostgresServer(bindir)
    redis_server.start()
    postgres.init()
    nginx.start()
    with redis.Redis.from_url(redis_server.url) as client:
        redis_pid = int(client.info("server")["process_id"])
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    return Services(redis_server, postgres, nginx, redis_pid, postmaster)


@dataclass
class Measured:
    """What one distributed (or scrapy-redis) run used, before any check of what it fetched."""

    wall_s: float
    crawler_cpu_s: float  # workers + dispatcher, or the scrapy-redis processes
    redis_cpu_s: float
    postgres_cpu_s: float
    others_cpu_s: float  # the rest of the machine (nginx included) meanwhile
    worker_rss_mb: list[float] = field(default_factory=list)
    expired: int = 0
    commands: dict[str, int] = field(default_factory=dict)
    redis_usec: int = 0
    dispatcher_cpu_s: float = 0.0
    postgres_commits: int = 0
    redis_reads: int = 0  # socket reads Redis served: about one per round trip
    worker_switches: tuple[int, int] = (0, 0)  # voluntary, involuntary: every worker's
    exit_code: int = 0  # the dispatcher's, or the first non-zero scrapy-redis process's
    timed_out: bool = False


class Worker:
    """One ``crawlfleet worker`` process; its CPU counts from when it said ready."""

    def __init__(
        self, crawlfleet: list[str], run_dir: Path, n: int, svc: Services, dsn: str, parsers: Path
    ) -> None:
        self.log_path = run_dir / f"worker-{n}.log"
        self._log = self.log_path.open("wb")
        argv = [*crawlfleet, "worker", "--redis", svc.redis.url, "--postgres", dsn]
        argv += ["--concurrency", "64", "--parsers", str(parsers), "--loglevel", "INFO"]
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


@dataclass(frozen=True)
class Cluster:
    """How to run crawlfleet's processes: the argv that starts ``crawlfleet`` (e.g. the
    console script, or ``env PYTHONPATH=… python -m crawlfleet``), the parsers, the
    dispatcher's environment, and py-spy (``None``: no profile)."""

    crawlfleet: list[str]
    parsers: Path
    env: dict[str, str] = field(default_factory=dict)
    py_spy: Path | None = None


def run_cluster(
    cluster: Cluster,
    svc: Services,
    run_dir: Path,
    name: str,
    crawl_args: list[str],
    *,
    workers: int,
    kills: int = 0,
    kill_every_s: float = 5.0,
    timeout_s: float = 900.0,
) -> tuple[Measured, list[dict[str, Any]]]:
    """One crawl by ``workers`` workers and the dispatcher ``crawl *crawl_args`` (the seeds
    and the crawl's flags; the Redis and PostgreSQL flags are added), in a PostgreSQL database
    and a crawl id of its own named after ``name``. With ``kills``, a worker is SIGKILLed
    every ``kill_every_s`` seconds that many times, each replaced at once. With
    ``cluster.py_spy``, the first worker and the dispatcher run under py-spy (raw samples in
    ``run_dir``; their CPU then counts py-spy's pauses). Returns the figures and the items."""
    database = name.replace("-", "_")
    svc.postgres.psql(f"CREATE DATABASE {database}")
    dsn = svc.postgres.dsn(database)
    crew = [
        Worker(cluster.crawlfleet, run_dir, n, svc, dsn, cluster.parsers) for n in range(workers)
    ]
    for worker in crew:
        worker.wait_ready()
    client = redis.Redis.from_url(svc.redis.url)
    client.config_resetstat()
    svc.nginx.clear_log()
    commits_before = commits(dsn, database)
    spy = None
    crawl_id = f"speed-{name}"
    argv = [*cluster.crawlfleet, "crawl", *crawl_args, "--parsers", str(cluster.parsers)]
    argv += ["--redis", svc.redis.url, "--postgres", dsn, "--crawl-id", crawl_id, "--fresh"]
    if cluster.py_spy is not None:
        spy_argv = [str(cluster.py_spy), "record", "--rate", "200", "--format", "raw"]
        worker_spy = [*spy_argv, "--pid", str(crew[0].process.pid)]
        worker_spy += ["-o", str(run_dir / "worker-0.txt")]
        spy = subprocess.Popen(worker_spy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        argv = [*spy_argv, "-o", str(run_dir / "dispatcher.txt"), "--", *argv]
    services_before = svc.cpu_s()
    busy_before = busy_cpu_s()
    dispatcher = subprocess.Popen(
        argv,
        stdout=(run_dir / "dispatcher.log").open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **cluster.env},
    )
    started = time.monotonic()
    killed: list[Worker] = []
    next_kill = started + kill_every_s
    timed_out = False
    while True:
        pid, status, usage = os.wait4(dispatcher.pid, os.WNOHANG)
        if pid:
            break
        if not timed_out and time.monotonic() - started > timeout_s:
            timed_out = True
            dispatcher.send_signal(signal.SIGTERM)
        if kills and time.monotonic() >= next_kill:
            victim = crew[len(killed) % len(crew)]
            victim.stop(signal.SIGKILL)
            killed.append(victim)
            number = workers + len(killed) - 1
            crew[crew.index(victim)] = replacement = Worker(
                cluster.crawlfleet, run_dir, number, svc, dsn, cluster.parsers
            )
            replacement.wait_ready()
            kills -= 1
            next_kill = time.monotonic() + kill_every_s
        time.sleep(0.02)
    wall_s = time.monotonic() - started
    exit_code = os.waitstatus_to_exitcode(status)
    dispatcher.returncode = exit_code
    for worker in crew:
        worker.sample()
    redis_cpu_s, postgres_cpu_s = (b - a for a, b in zip(services_before, svc.cpu_s(), strict=True))
    services_cpu_s = redis_cpu_s + postgres_cpu_s
    dispatcher_cpu_s = usage.ru_utime + usage.ru_stime
    everyone = [*crew, *killed]
    workers_cpu_s = sum(w.cpu_s for w in everyone)
    others_cpu_s = busy_cpu_s() - busy_before - dispatcher_cpu_s - workers_cpu_s - services_cpu_s
    stats = client.info("commandstats")
    redis_reads = int(client.info("stats")["total_reads_processed"])
    client.close()
    for worker in crew:
        worker.stop()
    postgres_commits = commits(dsn, database) - commits_before
    if spy is not None:
        spy.wait(timeout=60)
    with psycopg.connect(dsn) as db:
        rows = db.execute("SELECT data FROM items WHERE crawl_id = %s", [crawl_id]).fetchall()
        expired = db.execute(
            "SELECT count(*) FROM attempts WHERE crawl_id = %s AND error = %s",
            [crawl_id, LEASE_EXPIRED],
        ).fetchone()
    measured = Measured(
        wall_s,
        dispatcher_cpu_s + workers_cpu_s,
        redis_cpu_s,
        postgres_cpu_s,
        others_cpu_s,
        worker_rss_mb=[w.rss_mb for w in everyone],
        expired=int(expired[0]) if expired else 0,
        commands={k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()},
        redis_usec=sum(int(v["usec"]) for v in stats.values()),
        dispatcher_cpu_s=dispatcher_cpu_s,
        postgres_commits=postgres_commits,
        redis_reads=redis_reads,
        worker_switches=(
            sum(w.switches[0] for w in everyone),
            sum(w.switches[1] for w in everyone),
        ),
        exit_code=exit_code,
        timed_out=timed_out,
    )
    return measured, [r[0] for r in rows]


def commits(dsn: str, database: str) -> int:
    """Transactions committed in ``database`` so far (as the statistics have them)."""
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("SELECT pg_stat_clear_snapshot()")
        row = db.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [database]
        ).fetchone()
    return int(row[0]) if row else 0


def run_scrapy_redis(
    spider: list[str],
    svc: Services,
    run_dir: Path,
    key: str,
    seeds: list[str],
    *,
    processes: int = 2,
    timeout_s: float = 900.0,
) -> Measured:
    """``processes`` scrapy-redis processes (``spider``: the argv of ``scrapy_redis_spider.py``
    without ``--out``/``--redis``/``--key``) sharing scheduler and dupefilter under ``key``,
    seeded with ``seeds``; each writes ``items-<n>.jsonl`` in ``run_dir``. Wall time ends at
    the last response in nginx's log (the processes then idle before they close, which
    favours scrapy-redis)."""
    client = redis.Redis.from_url(svc.redis.url)
    client.delete(f"{key}:requests", f"{key}:dupefilter", f"{key}:start_urls")
    client.rpush(f"{key}:start_urls", *(json.dumps({"url": s}) for s in seeds))
    client.config_resetstat()
    svc.nginx.clear_log()
    services_before = svc.cpu_s()
    busy_before = busy_cpu_s()
    started_wall = time.time()
    started = time.monotonic()
    running = []
    for n in range(processes):
        argv = [*spider, "--out", str(run_dir / f"items-{n}.jsonl"), "--redis", svc.redis.url]
        log = (run_dir / f"scrapy-{n}.log").open("wb")
        argv += ["--key", key]
        running.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
    usages: dict[int, Any] = {}  # pid: its rusage, once reaped
    timed_out = False
    while len(usages) < len(running):
        for p in running:
            if p.pid not in usages:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    usages[pid] = usage
                    p.returncode = os.waitstatus_to_exitcode(status)
        if not timed_out and time.monotonic() - started > timeout_s:
            timed_out = True
            for p in running:
                if p.pid not in usages:
                    p.kill()
        time.sleep(0.05)
    process_wall_s = time.monotonic() - started
    redis_cpu_s, postgres_cpu_s = (b - a for a, b in zip(services_before, svc.cpu_s(), strict=True))
    services_cpu_s = redis_cpu_s + postgres_cpu_s
    cpu_s = sum(u.ru_utime + u.ru_stime for u in usages.values())
    others = busy_cpu_s() - busy_before - cpu_s - services_cpu_s
    stats = client.info("commandstats")
    redis_reads = int(client.info("stats")["total_reads_processed"])
    client.close()
    raw = svc.nginx.access_log.read_text(errors="replace").splitlines()
    last_s = max(float(line.split("\t")[0]) for line in raw) if raw else started_wall
    return Measured(
        min(process_wall_s, last_s - started_wall),
        cpu_s,
        redis_cpu_s,
        postgres_cpu_s,
        others,
        worker_rss_mb=[u.ru_maxrss / 1024 for u in usages.values()],
        commands={k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()},
        redis_usec=sum(int(v["usec"]) for v in stats.values()),
        redis_reads=redis_reads,
        exit_code=next((p.returncode for p in running if p.returncode), 0),
        timed_out=timed_out,
    )
