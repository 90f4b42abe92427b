"""Five hosts on one machine: a distributed crawl across real network links, one of them cut.

``NetLab`` (``tests/fixtures/netns.py``) builds the hosts as network namespaces on a bridge,
each with its own address and host name, as containers are:

- ``services`` (10.201.7.1): Redis (password, AOF, ``noeviction``) and PostgreSQL (password
  auth from the subnet), started from the machine's binaries; the dispatcher runs here too;
- ``worker-a``, ``worker-b`` (.2, .3): one ``crawlfleet worker`` each;
- ``target`` (.4; the shop on .41, the quotes on .42, the lab on .43): ``crawlfleet
  demo-site``.

Every crawlfleet process runs the command of the container images (``deploy/``): ``crawlfleet
worker --concurrency N`` with the Redis URL and PostgreSQL DSN read from secret files
(``CRAWLFLEET_REDIS_URL_FILE``, ``CRAWLFLEET_POSTGRES_DSN_FILE``), ``crawlfleet db migrate``
as the one-shot service, ``crawlfleet worker --health`` as the health check. The test itself
reads Redis and PostgreSQL through their Unix sockets, never over the lab's network.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis

from crawlfleet.demosite import AccessRecord, ThreadedDemoSite, gaps_s, read_access_log
from tests.e2e.conftest import ItemKeys
from tests.fixtures.netns import SUBNET_PREFIX, Host, NetLab, why_no_netns
from tests.fixtures.postgres_server import _bindir

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.timeout(150)]

CRAWLFLEET = str(Path(sys.executable).parent / "crawlfleet")
SRC = str(Path(__file__).resolve().parents[2] / "src")
DELAY_S = 0.1
LEASE_S = 5.0  # a cut host's leases come back this soon
SITE_PORT = 8800
ROLE_HOSTS = {"shop": 41, "quotes": 42, "lab": 43}
SLOW_PAGES = 8  # the lab's /slow pages, all allowed in flight at once: more than one worker's
SLOW_MS = 2000  # concurrency (4), so worker-b surely reads some, each for 2 s
PASSWORD = "lab-secret-4f2a"  # the lab's own servers, gone at the end


@dataclass
class Services:
    """The services host's Redis and PostgreSQL, and how the test reaches them."""

    host: Host
    root: Path
    redis_process: subprocess.Popen[bytes]
    pg_bin: Path

    @property
    def redis_url(self) -> str:
        return f"redis://:{PASSWORD}@{self.host.address}:6379/0"

    @property
    def postgres_dsn(self) -> str:
        return f"postgresql://postgres:{PASSWORD}@{self.host.address}:5432/crawl"

    def redis(self) -> redis.Redis:
        return redis.Redis(unix_socket_path=str(self.root / "redis.sock"), password=PASSWORD)

    def sql(self, query: str) -> list[tuple[object, ...]]:
        with psycopg.connect(f"host={self.root} port=5432 user=postgres dbname=crawl") as conn:
            return list(conn.execute(query))  # type: ignore[arg-type]

    def stop(self) -> None:
        self.redis_process.kill()
        self.redis_process.wait()
        pg_ctl = [str(self.pg_bin / "pg_ctl"), "-D", str(self.root / "pg"), "-m", "immediate"]
        subprocess.run(["runuser", "-u", "postgres", "--", *pg_ctl, "stop"], capture_output=True)


def start_services(host: Host, root: Path) -> Services:
    pg_bin = _bindir()
    if pg_bin is None:
        pytest.skip("PostgreSQL binaries not found: run scripts/bootstrap.sh --all")
    shutil.chown(root, "postgres", "postgres")
    as_postgres = ["runuser", "-u", "postgres", "--"]
    run = lambda *cmd: subprocess.run(cmd, check=True, capture_output=True, timeout=60)  # noqa: E731
    run(*as_postgres, str(pg_bin / "initdb"), "-D", str(root / "pg"), "-A", "trust",
        "-U", "postgres", "--no-sync")  # fmt: skip
    with (root / "pg" / "pg_hba.conf").open("a") as hba:
        hba.write(f"host all all {SUBNET_PREFIX}0/24 scram-sha-256\n")
    options = (
        f"-p 5432 -c listen_addresses={host.address} -k {root} -c fsync=off -c full_page_writes=off"
    )
    run("ip", "netns", "exec", host.ns, *as_postgres, str(pg_bin / "pg_ctl"), "-D",
        str(root / "pg"), "-o", options, "-l", str(root / "pg.log"), "-w", "start")  # fmt: skip
    psql = [str(pg_bin / "psql"), "-h", str(root), "-p", "5432", "-U", "postgres", "-qc"]
    run(*psql, f"ALTER ROLE postgres PASSWORD '{PASSWORD}'")
    run(*psql, "CREATE DATABASE crawl")
    redis_args = [
        "--bind", host.address, "--port", "6379", "--requirepass", PASSWORD,
        "--appendonly", "yes", "--maxmemory-policy", "noeviction", "--save", "",
        "--dir", str(root), "--unixsocket", str(root / "redis.sock"), "--unixsocketperm", "700",
        "--logfile", str(root / "redis.log"),
    ]  # fmt: skip
    redis_process = subprocess.Popen(
        ["ip", "netns", "exec", host.ns, "redis-server", *redis_args], stdout=subprocess.DEVNULL
    )
    services = Services(host, root, redis_process, pg_bin)
    wait_for(lambda: _pings(services), "Redis on the services host", 10)
    return services


def _pings(services: Services) -> bool:
    try:
        with services.redis() as client:
            return bool(client.ping())
    except redis.ConnectionError:
        return False


def wait_for(check: object, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@dataclass
class Fleet:
    """The lab, its services and the crawlfleet processes started on its hosts."""

    lab: NetLab
    services: Services
    root: Path
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]]

    def start(self, host: Host, *args: str, log: str) -> subprocess.Popen[bytes]:
        with (self.root / log).open("ab") as out:
            process = subprocess.Popen(
                host.command(CRAWLFLEET, *args), stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        self.processes.append(process)
        return process

    def run(
        self, host: Host, *args: str, timeout_s: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            host.command(CRAWLFLEET, *args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def log(self, name: str) -> str:
        path = self.root / name
        return path.read_text(errors="replace") if path.exists() else ""

    def probe(self, *hosts: Host) -> list[subprocess.Popen[str]]:
        """Start ``crawlfleet worker --health`` on each host; ``answers`` collects them."""
        return [
            subprocess.Popen(
                host.command(CRAWLFLEET, "worker", "--health"),
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for host in hosts
        ]

    def health(self, *hosts: Host) -> list[tuple[int, str]]:
        """``crawlfleet worker --health`` on each host at once: (exit code, output) each."""
        return answers(self.probe(*hosts))

    def healthy(self, *hosts: Host) -> bool:
        return all(code == 0 for code, _ in self.health(*hosts))

    def tails(self, *logs: str) -> str:
        """The last lines of each log, for a failure message."""
        return "\n".join(f"--- {name}\n{self.log(name)[-2500:]}" for name in logs)

    def exits_cleanly(self, process: subprocess.Popen[bytes], log: str, *hosts: Host) -> None:
        """Assert ``process`` exits 0 within 60 s; if not, say so with its and the hosts' logs."""
        try:
            code: int | str = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            code = "still running after 60 s"
        if code != 0:
            logs = (log, *(f"{host.hostname}.log" for host in hosts))
            raise AssertionError(f"{log}: {code}\n{self.tails(*logs)}")

    def free_since(self, host: Host, since: float) -> bool:
        """Whether a worker of ``host`` said after ``since`` (epoch s) that it runs no step."""
        with self.services.redis() as client:
            beats = [json.loads(raw) for name, raw in client.hgetall("crawlfleet:workers").items()
                     if name.decode().rpartition(":")[0] == host.hostname]  # fmt: skip
        return any(beat["seen_at"] > since and beat["in_flight"] == 0 for beat in beats)


def answers(probes: list[subprocess.Popen[str]]) -> list[tuple[int, str]]:
    outputs = [probe.communicate(timeout=30)[0] for probe in probes]
    return [(probe.returncode, out.strip()) for probe, out in zip(probes, outputs, strict=True)]


@pytest.fixture
def fleet() -> Iterator[Fleet]:
    reason = why_no_netns()
    if reason is not None:
        pytest.skip(f"multi-host test skipped: {reason}")
    root = Path(tempfile.mkdtemp(prefix="crawlfleet-lab-"))
    processes: list[subprocess.Popen[bytes]] = []
    with NetLab() as lab:
        services_host = lab.add_host("services", 1)
        lab.add_host("worker-a", 2)
        lab.add_host("worker-b", 3)
        lab.add_host("target", 4, *ROLE_HOSTS.values())
        services = start_services(services_host, root)
        secrets = root / "secrets"
        secrets.mkdir(mode=0o700)
        (secrets / "redis_url").write_text(services.redis_url + "\n")
        (secrets / "postgres_dsn").write_text(services.postgres_dsn + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLFLEET_")}
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])),
            CRAWLFLEET_REDIS_URL_FILE=str(secrets / "redis_url"),
            CRAWLFLEET_POSTGRES_DSN_FILE=str(secrets / "postgres_dsn"),
        )
        fleet = Fleet(lab, services, root, env, processes)
        try:
            yield fleet
        finally:
            for process in processes:
                process.kill()
                process.wait()
            services.stop()
    shutil.rmtree(root, ignore_errors=True)


def on_target(site: ThreadedDemoSite, items: ItemKeys) -> ItemKeys:
    """``items`` of a crawl of the loopback demo site, with the target host's origins."""
    origins = {
        site.url(role, ""): f"http://{SUBNET_PREFIX}{n}:{SITE_PORT}"
        for role, n in ROLE_HOSTS.items()
    }
    mapped = set()
    for item_type, key in items:
        for loopback, target in origins.items():
            key = key.replace(loopback, target)
        mapped.add((item_type, key))
    return mapped


def pages(records: list[AccessRecord]) -> list[AccessRecord]:
    return [r for r in records if r.path != "/robots.txt"]


def test_two_worker_hosts_share_a_crawl_and_survive_a_cut_link(
    fleet: Fleet, testsite: ThreadedDemoSite, shop_quotes_items: ItemKeys
) -> None:
    lab = fleet.lab
    services, a, b, target = (lab.hosts[n] for n in ("services", "worker-a", "worker-b", "target"))
    access_log = fleet.root / "access.jsonl"
    role_args = [f"--address={role}={SUBNET_PREFIX}{n}" for role, n in ROLE_HOSTS.items()]
    fleet.start(target, "demo-site", f"--port={SITE_PORT}", f"--access-log={access_log}",
                *role_args, log="target.log")  # fmt: skip

    migrate = fleet.start(services, "db", "migrate", log="migrate.log")  # the one-shot service
    workers = {
        host: fleet.start(host, "worker", "--concurrency=4", log=f"{host.hostname}.log")
        for host in (a, b)
    }  # workers migrate too, under the same advisory lock: no need to wait
    assert migrate.wait(timeout=60) == 0, fleet.log("migrate.log")
    assert PASSWORD not in fleet.log("migrate.log")
    for host in (a, b):
        log = f"{host.hostname}.log"
        wait_for(lambda log=log: "ready." in fleet.log(log), f"{host.hostname} ready", 40)
    wait_for(lambda: fleet.healthy(a, b), "both workers healthy", 30)  # idle: no task yet

    origin = {role: f"http://{SUBNET_PREFIX}{n}:{SITE_PORT}" for role, n in ROLE_HOSTS.items()}
    slow = [f"{origin['lab']}/slow?delay_ms={SLOW_MS}&n={n}" for n in range(SLOW_PAGES)]
    seeds = [f"{origin['shop']}/", f"{origin['quotes']}/", *slow]
    crawl_args = ["--allow-private-addresses", f"--delay={DELAY_S}"]
    fleet.env["CRAWLFLEET_LEASE_S"] = str(LEASE_S)
    shop_quotes = rf"^http://{SUBNET_PREFIX}4[12]:".replace(".", r"\.")
    fleet.env["CRAWLFLEET_ALLOW"] = json.dumps([shop_quotes, r"/slow\?"])  # the lab's slow only
    lab_host = f"{SUBNET_PREFIX}{ROLE_HOSTS['lab']}"
    fleet.env["CRAWLFLEET_DOMAINS"] = json.dumps({lab_host: {"concurrency": SLOW_PAGES}})
    dispatcher = fleet.start(services, "crawl", *seeds, "--crawl-id=lab", *crawl_args,
                             log="dispatcher.log")  # fmt: skip

    def b_is_mid_page() -> bool:  # both hosts fetched, and b is reading a slow page now
        records = pages(read_access_log(access_log))
        slow_now = [
            r for r in records
            if r.client == b.address and r.role == "lab" and time.monotonic() - r.monotonic_s < 1.5
        ]  # fmt: skip
        both = {a.address, b.address} <= {r.client for r in records}
        return both and bool(slow_now)

    wait_for(b_is_mid_page, "both worker hosts fetching, b in a slow page", 40)
    b.link(up=False)
    cut_at = time.monotonic()
    with fleet.services.redis() as client:
        assert int(client.hget("crawlfleet:{lab}:counts", "queued") or 0) > 0  # mid-crawl
    probes = fleet.probe(b, a)

    fleet.exits_cleanly(dispatcher, "dispatcher.log", a, b)
    assert workers[a].poll() is None
    assert workers[b].poll() is None
    (cut_code, cut_said), (a_code, a_said) = answers(probes)
    assert cut_code == 1, cut_said
    assert cut_said.startswith("Redis at redis://:***@10.201.7.1:6379/0 unreachable: ")
    assert PASSWORD not in cut_said
    assert a_code == 0, a_said

    stored = {
        (str(t), str(k)) for t, k in fleet.services.sql("SELECT item_type, item_key FROM items")
    }
    expected = on_target(testsite, shop_quotes_items) | {("page", url) for url in slow}
    assert stored == expected  # 0 lost, nothing extra
    assert fleet.services.sql("SELECT count(*) FROM attempts WHERE outcome = 'dead'") == [(0,)]
    lost = fleet.services.sql("SELECT url FROM attempts WHERE error LIKE 'lease expired%'")
    assert lost, "b held no lease when its link went down"
    assert {str(url) for (url,) in lost} & set(slow)  # b's slow page came back to a
    with fleet.services.redis() as client:
        counts = {k.decode(): int(v) for k, v in client.hgetall("crawlfleet:{lab}:counts").items()}
    assert counts.get("dead", 0) == 0, counts

    records = pages(read_access_log(access_log))
    peers = {a.address, b.address}
    # (a request b sent just before the cut may be logged a little later, on a loaded machine)
    late = [r for r in records if r.client == b.address and r.monotonic_s > cut_at + 2]
    assert late == []

    b.link(up=True)
    up_at = time.time()
    wait_for(lambda: fleet.healthy(b), "worker-b back", 40)
    # The probe may pass while b still drains the task it was in (its steps wait out their
    # fetch timeouts). Start the second crawl once b says it runs nothing: it then takes tasks,
    # and the slow pages are not all gone to a before b looks (CI once saw b's first task of
    # the second crawl find only the polite domains).
    wait_for(lambda: fleet.free_since(b, up_at), "worker-b free again", 60)
    rejoined_at = time.monotonic()
    # The slow pages again: more in flight at once than one worker's concurrency. On the two
    # polite domains alone, the worker that ends a page sees the domain's next due time at
    # once, while the other polls blind (up to 0.5 s, longer than the 0.1 s delay), so one
    # worker could do all of a short crawl.
    second = fleet.start(services, "crawl", *seeds, "--crawl-id=lab2", *crawl_args,
                         log="dispatcher2.log")  # fmt: skip

    def b_fetches_again() -> bool:
        records = read_access_log(access_log)
        return any(r.client == b.address and r.monotonic_s > rejoined_at for r in pages(records))

    try:
        wait_for(b_fetches_again, "worker-b fetching again", 30)
    except AssertionError as exc:  # say what b and the dispatcher did meanwhile
        raise AssertionError(
            f"{exc}\n{fleet.tails(f'{b.hostname}.log', 'dispatcher2.log')}"
        ) from None
    fleet.exits_cleanly(second, "dispatcher2.log", a, b)
    hosts_that_worked = {
        str(w).rpartition(":")[0]
        for (w,) in fleet.services.sql("SELECT worker FROM attempts WHERE outcome = 'ok'")
    }
    assert hosts_that_worked == {"worker-a", "worker-b"}

    records = pages(read_access_log(access_log))  # both crawls, one after the other
    polite = ("shop", "quotes")  # one request in flight at a time (the lab allows 8)
    for role in polite:  # politeness across hosts: the server's gaps, both hosts mixed
        assert min(gaps_s(records, role)) >= DELAY_S * 0.95
    shared = [role for role in polite if {r.client for r in records if r.role == role} == peers]
    assert shared, "no domain was fetched from both worker hosts"


HOLDER = """
import asyncio, sys
from crawlfleet.pipeline.sinks.postgres import connect_session

async def main():
    conn = await connect_session(sys.argv[1])
    await conn.execute("SELECT 1 FROM items WHERE item_key = 'held' FOR UPDATE")
    print("locked", flush=True)
    await asyncio.sleep(120)

asyncio.run(main())
"""


def test_a_worker_cut_off_in_a_transaction_leaves_its_rows_to_the_others(fleet: Fleet) -> None:
    """A worker whose link goes down while its transaction holds rows (the sink locks a
    batch's rows, then reads the results before its last statements) no longer holds them
    once the server has found it gone, within seconds (``connect_session``). Before, the
    server waited for TCP's two hours; the other workers, fetching the cut worker's pages
    again once its leases expired, waited on those rows, and the crawl stopped (seen once
    in ``test_two_worker_hosts_share_a_crawl_and_survive_a_cut_link``: 0 pages/s for 60 s)."""
    services, b = fleet.services, fleet.lab.hosts["worker-b"]
    migrated = fleet.run(services.host, "db", "migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    local = f"host={services.root} port=5432 user=postgres dbname=crawl"
    with psycopg.connect(local, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO items (crawl_id, item_type, item_key, data, content_hash, fetched_at,"
            " first_seen, last_seen, last_changed)"
            " VALUES ('lab', 'product', 'held', '{}', 'h', now(), now(), now(), now())"
        )
    argv = b.command(sys.executable, "-c", HOLDER, services.postgres_dsn)
    holder = subprocess.Popen(argv, stdout=subprocess.PIPE, env=fleet.env)
    fleet.processes.append(holder)
    assert holder.stdout is not None
    with holder.stdout:
        assert holder.stdout.readline() == b"locked\n"
    b.link(up=False)
    cut_at = time.monotonic()
    with psycopg.connect(local, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '60s'")
        conn.execute("SELECT 1 FROM items WHERE item_key = 'held' FOR UPDATE")
    assert time.monotonic() - cut_at < 30  # 5 s idle, then 3 probes 2 s apart, and a margin
