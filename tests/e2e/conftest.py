"""Fixtures for the distributed end-to-end tests: worker and dispatcher processes.

``workers`` starts ``crawlfleet worker`` processes (real Celery workers, solo pool) and kills
whatever is still running at the end of the test; each writes its log to a file the test can
read. ``dispatch`` runs ``crawlfleet crawl --redis ... --postgres ...`` as a subprocess.
``rabbitmq_vhost`` creates a private vhost on the shared RabbitMQ and deletes it afterwards.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import redis
from typer.testing import CliRunner

from crawlfleet.cli.main import app
from crawlfleet.demosite import ThreadedDemoSite

CRAWLFLEET = str(Path(sys.executable).parent / "crawlfleet")
READY_TIMEOUT_S = 30.0

DELAY_S = 0.05
FAST = ["--allow-private-addresses", "--delay", str(DELAY_S)]
PICKY_LADDER = """\
[crawl]
allow = ["/picky/"]
ladder = ["slow", "impersonate"]
block_window = 4
block_min_samples = 2
block_threshold = 0.5
block_cooldown_s = 0.1
max_retries = 20
backoff_base_s = 0.02
backoff_max_s = 0.1
"""
"""A crawl of the demo's picky pages (they answer only a browser's client hints) whose domain
climbs the ladder to the impersonate fetcher quickly."""

ItemKeys = set[tuple[str, str]]


def embedded_items(tmp_path: Path, seeds: list[str], *args: str) -> ItemKeys:
    """(item_type, item_key) of an embedded crawl of the same seeds."""
    state = tmp_path / "embedded"
    result = CliRunner().invoke(app, ["crawl", *seeds, "--state", str(state), *FAST, *args])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(state / "items.sqlite") as db:
        return {(t, k) for t, k in db.execute("SELECT item_type, item_key FROM items")}


@pytest.fixture(scope="session")
def shop_quotes_items(
    testsite: ThreadedDemoSite, tmp_path_factory: pytest.TempPathFactory
) -> ItemKeys:
    """The items of an embedded crawl of the shop and quotes hosts (computed once)."""
    seeds = [testsite.url("shop"), testsite.url("quotes")]
    return embedded_items(tmp_path_factory.mktemp("embedded"), seeds)


def postgres_items(dsn: str) -> ItemKeys:
    with psycopg.connect(dsn) as conn:
        return {(t, k) for t, k in conn.execute("SELECT item_type, item_key FROM items")}


def crawl_done(redis_url: str, crawl_id: str) -> int:
    """Requests done so far, from the frontier's counters."""
    with redis.Redis.from_url(redis_url) as client:
        return int(client.hget(f"crawlfleet:{{{crawl_id}}}:counts", "done") or 0)


def attempt_workers(dsn: str) -> Counter[str]:
    with psycopg.connect(dsn) as conn:
        return Counter(w for (w,) in conn.execute("SELECT worker FROM attempts"))


@dataclass
class WorkerProcess:
    """One ``crawlfleet worker`` process and its log file."""

    args: list[str]
    log_path: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [CRAWLFLEET, "worker", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until Celery logs that the worker is ready."""
        deadline = time.monotonic() + timeout_s
        while "ready." not in self.log():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"worker exited {self.process.returncode}: {self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready: {self.log()[-3000:]}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM (warm shutdown); the exit code."""
        if self.process is None:
            return 0
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout_s)


@dataclass
class Workers:
    """Factory and owner of the worker processes of one test."""

    tmp_path: Path
    started: list[WorkerProcess] = field(default_factory=list)

    def start(
        self,
        redis_url: str,
        dsn: str,
        *,
        concurrency: int = 4,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        ready: bool = True,
    ) -> WorkerProcess:
        n = len(self.started)
        args = ["--redis", redis_url, "--postgres", dsn, "--concurrency", str(concurrency)]
        worker = WorkerProcess(
            [*args, *extra],
            self.tmp_path / f"worker-{n}.log",
            {**os.environ, **(env or {})},
        ).start()
        self.started.append(worker)
        if ready:
            worker.wait_ready()
        return worker

    def stop_all(self) -> None:
        for worker in self.started:
            worker.kill()


class KillAt:
    """A crawl's fault: each time ``done`` pages reach the next of ``thresholds``, SIGKILL the
    victim worker and start a fresh one in its place; True once every kill has happened."""

    def __init__(self, workers: Workers, redis_url: str, dsn: str, thresholds: list[int]) -> None:
        self._start = lambda ready: workers.start(redis_url, dsn, concurrency=4, ready=ready)
        self._thresholds = thresholds
        self.kills = 0
        self.victim = self._start(True)

    def __call__(self, done: int) -> bool:
        if self.kills < len(self._thresholds) and done >= self._thresholds[self.kills]:
            self.victim.kill()
            self.kills += 1
            self.victim = self._start(False)
        return self.kills == len(self._thresholds)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()


def dispatch(
    *args: str,
    env: dict[str, str] | None = None,
    timeout_s: float = 90.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``crawlfleet crawl ARGS`` to completion; output in ``.stdout`` (stderr merged)."""
    return subprocess.run(
        [CRAWLFLEET, "crawl", *args],
        capture_output=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout_s,
        check=False,
    )


def start_dispatch(
    *args: str, log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``crawlfleet crawl ARGS`` in the background, output to ``log_path``."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [CRAWLFLEET, "crawl", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["rabbitmqctl", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def rabbitmq_vhost() -> Iterator[str]:
    """An ``amqp://`` URL to a private vhost on the local RabbitMQ (deleted afterwards)."""
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl not found")
    vhost = f"crawlfleet-test-{uuid.uuid4().hex[:8]}"
    if _rabbitmqctl("add_vhost", vhost).returncode != 0:
        pytest.skip("cannot create a RabbitMQ vhost")
    _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    _rabbitmqctl("delete_vhost", vhost)
