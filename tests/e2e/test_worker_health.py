"""``crawlfleet worker --health`` and secrets from files, on loopback (no namespaces needed).

The multi-host test (``test_multihost.py``) checks the same probe across real links, cut and
restored; this one runs wherever Redis and PostgreSQL can be started.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import redis

from crawlfleet.runtime.celery.definition import WORKERS
from tests.e2e.conftest import Workers
from tests.fixtures.cli import assert_one_line_error, run_cli
from tests.fixtures.redis_server import RedisServer

pytestmark = pytest.mark.slow


def health(redis_url: str, tmp_path: Path) -> tuple[int, str]:
    result = run_cli("worker", "--health", "--redis", redis_url, cwd=tmp_path)
    return result.returncode, (result.stdout + result.stderr).strip()


def test_health_follows_the_heartbeat_of_this_hosts_worker(
    start_redis: Callable[..., RedisServer], postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    server = start_redis()
    code, said = health(server.url, tmp_path)
    assert (code, said) == (1, f"no worker of host {socket.gethostname()} has sent a heartbeat")

    worker = workers.start(server.url, postgres_dsn)  # idle: no crawl, no task
    deadline = time.monotonic() + 15
    while (code := health(server.url, tmp_path)[0]) != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    code, said = health(server.url, tmp_path)
    assert code == 0, said
    assert said.startswith(f"worker {socket.gethostname()}:")
    assert "heartbeat" in said
    worker.terminate()

    with redis.Redis.from_url(server.url) as client:
        (name,) = client.hkeys(WORKERS)
        beat = orjson.loads(client.hget(WORKERS, name) or b"{}")
        client.hset(WORKERS, name, orjson.dumps({**beat, "seen_at": time.time() - 100}))
    code, said = health(server.url, tmp_path)
    assert code == 1
    assert re.search(r": last heartbeat 1\d\d s ago \(live under 30 s\)$", said), said


def test_health_of_an_unreachable_redis_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = "redis://:hunter2-pw@127.0.0.1:1/0"
    code, said = health(url, tmp_path)
    assert code == 1
    assert said.startswith("Redis at redis://:***@127.0.0.1:1/0 unreachable: ")
    assert "hunter2" not in said
    assert "\n" not in said


def test_commands_read_connections_from_secret_files(postgres_dsn: str, tmp_path: Path) -> None:
    dsn_file = tmp_path / "postgres_dsn"
    dsn_file.write_text(postgres_dsn + "\n")
    env = {"CRAWLFLEET_POSTGRES_DSN_FILE": str(dsn_file)}
    migrate = run_cli("db", "migrate", cwd=tmp_path, env=env)
    assert migrate.returncode == 0, migrate.stderr
    assert "applied migrations" in migrate.stdout

    missing = {"CRAWLFLEET_POSTGRES_DSN_FILE": str(tmp_path / "nowhere")}
    line = assert_one_line_error(run_cli("db", "migrate", cwd=tmp_path, env=missing))
    assert line == f"error: CRAWLFLEET_POSTGRES_DSN_FILE: file not found: {tmp_path}/nowhere"
    both = {**env, "CRAWLFLEET_POSTGRES_DSN": postgres_dsn}
    line = assert_one_line_error(run_cli("db", "migrate", cwd=tmp_path, env=both))
    assert "both CRAWLFLEET_POSTGRES_DSN and CRAWLFLEET_POSTGRES_DSN_FILE are set" in line


def test_a_worker_without_a_postgres_dsn_is_a_one_line_error(tmp_path: Path) -> None:
    result = run_cli("worker", "--redis", "redis://127.0.0.1:1/0", cwd=tmp_path)
    line = assert_one_line_error(result)
    assert line == "error: missing --postgres (or CRAWLFLEET_POSTGRES_DSN[_FILE])"


def test_the_dashboard_reads_its_connections_from_secret_files(tmp_path: Path) -> None:
    redis_file = tmp_path / "redis_url"
    redis_file.write_text("redis://:hunter2-pw@127.0.0.1:1/0\n")
    env = {"CRAWLFLEET_REDIS_URL_FILE": str(redis_file)}
    line = assert_one_line_error(run_cli("dashboard", cwd=tmp_path, env=env))
    assert line == "error: a distributed dashboard needs both --redis URL and --postgres DSN"


def test_health_fails_for_a_worker_stalled_with_a_full_task_window(
    start_redis: Callable[..., RedisServer], postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    server = start_redis()
    worker = workers.start(server.url, postgres_dsn)
    deadline = time.monotonic() + 15
    while health(server.url, tmp_path)[0] != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    worker.terminate()

    with redis.Redis.from_url(server.url) as client:
        (name,) = client.hkeys(WORKERS)
        beat = orjson.loads(client.hget(WORKERS, name) or b"{}")
        assert beat["stalled_since"] is None
        stalled = {**beat, "seen_at": time.time(), "stalled_since": time.time() - 45}
        client.hset(WORKERS, name, orjson.dumps(stalled))
    code, said = health(server.url, tmp_path)
    assert code == 1
    assert re.search(r": took no task for 4\d s, its task window full with no task running", said)
