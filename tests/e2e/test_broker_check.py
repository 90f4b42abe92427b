"""A Celery broker that cannot be imported or reached stops the worker and the dispatcher at
start with one line and exit 2, within ``BOUND_S``: Celery alone retries it forever."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlfleet.demosite import ThreadedDemoSite
from tests.e2e.conftest import FAST, Workers, dispatch
from tests.fixtures.redis_server import free_port

BOUND_S = 15.0
WIDE = {"COLUMNS": "500"}  # rich wraps at the terminal width; a wide one shows it is one line


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


@pytest.fixture
def no_packaging(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import packaging`` fails, as on a host that lacks it."""
    shadow = tmp_path / "shadow" / "packaging"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'packaging'\", name='packaging')\n"
    )
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, **WIDE}


def one_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


def check_worker(
    workers: Workers, redis_url: str, dsn: str, broker: str | None, env: dict[str, str] = WIDE
) -> str:
    """The one line of a worker that refused its broker (``--broker``, or from ``env``)."""
    started = time.monotonic()
    extra = ("--broker", broker) if broker is not None else ()
    worker = workers.start(redis_url, dsn, extra=extra, env=env, ready=False)
    assert worker.process is not None
    assert worker.process.wait(timeout=BOUND_S) == 2, worker.log()
    assert time.monotonic() - started < BOUND_S
    return one_line(worker.log())


def check_dispatch(site: ThreadedDemoSite, redis_url: str, dsn: str, env: dict[str, str]) -> str:
    started = time.monotonic()
    result = dispatch(
        site.url("quotes"), "--redis", redis_url, "--postgres", dsn, *FAST,
        env=env, timeout_s=BOUND_S,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout
    assert time.monotonic() - started < BOUND_S
    return one_line(result.stdout)


@pytest.mark.redis
@pytest.mark.postgres
def test_a_closed_broker_port_is_one_line_and_exit_2(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    broker = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    line = check_worker(workers, redis_url, postgres_dsn, broker)
    assert "Celery broker at redis://:***@127.0.0.1" in line
    assert "hunter2" not in line
    line = check_dispatch(site, redis_url, postgres_dsn, {"CRAWLFLEET_BROKER_URL": broker, **WIDE})
    assert "Celery broker at redis://:***@127.0.0.1" in line
    assert "hunter2" not in line


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_a_broker_that_never_answers_is_one_line_and_exit_2(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers, silent_port: int
) -> None:
    broker = f"redis://127.0.0.1:{silent_port}/0"
    assert "unreachable" in check_worker(workers, redis_url, postgres_dsn, broker)
    env = {"CRAWLFLEET_BROKER_URL": f"amqp://127.0.0.1:{silent_port}//", **WIDE}
    assert "unreachable" in check_dispatch(site, redis_url, postgres_dsn, env)


@pytest.mark.redis
@pytest.mark.postgres
def test_a_transport_that_cannot_be_imported_is_one_line_and_exit_2(
    site: ThreadedDemoSite,
    redis_url: str,
    postgres_dsn: str,
    workers: Workers,
    no_packaging: dict[str, str],
) -> None:
    expected = "the Celery broker transport for redis:// cannot be imported"
    line = check_worker(workers, redis_url, postgres_dsn, redis_url, env=no_packaging)
    assert expected in line
    assert "'packaging'" in line
    assert expected in check_dispatch(site, redis_url, postgres_dsn, no_packaging)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_the_worker_reads_its_broker_from_the_environment_or_a_file(
    redis_url: str, postgres_dsn: str, workers: Workers, tmp_path: Path
) -> None:
    broker = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    for env in (
        {"CRAWLFLEET_BROKER_URL": broker},  # was ignored: the worker used the Redis URL
        {"CRAWLFLEET_BROKER_URL_FILE": str(secret_file(tmp_path, broker))},
    ):
        line = check_worker(workers, redis_url, postgres_dsn, None, {**WIDE, **env})
        assert "Celery broker at redis://:***@127.0.0.1" in line
        assert "hunter2" not in line


def secret_file(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "broker_url"
    path.write_text(content + "\n")
    return path
