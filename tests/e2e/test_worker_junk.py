"""Junk pushed straight onto a Celery queue list in the broker's Redis: the worker logs and
drops each entry and goes on serving (one such entry used to stop it: "Unrecoverable error:
JSONDecodeError")."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import redis
from celery import Celery

from crawlfleet.demosite import ThreadedDemoSite
from crawlfleet.runtime.celery.redis_transport import envelope_problem
from tests.e2e.conftest import FAST, Workers, dispatch

QUEUE = "http"
NOT_JSON = [
    b"\x00\xff\xfe\x80junk",
    b'{"body": ',
    b"\xc3\x28",  # invalid UTF-8
    b"",
]
ODD_VALUES: list[Any] = [None, 1, "x", [], {}, True, "!!not base64!!"]


def real_envelope(redis_url: str) -> dict[str, Any]:
    """A task message as Celery writes it on the list (sent to a scratch queue, read back)."""
    scratch = "junk-scratch"
    sender = Celery("junk", broker=redis_url, set_as_current=False)
    sender.send_task("crawlfleet.crawl_batch", args=["no-such-crawl", 1], queue=scratch)
    with redis.Redis.from_url(redis_url) as client:
        raw = client.rpop(scratch)
    assert isinstance(raw, bytes)
    envelope: dict[str, Any] = orjson.loads(raw)
    return envelope


def mutations(envelope: dict[str, Any]) -> Iterator[Any]:
    """The envelope with each field (top level, properties, delivery_info) removed or odd."""
    yield from (None, 1, "text", [envelope], [], {})
    places: list[tuple[str, ...]] = [
        *((key,) for key in envelope),
        *(("properties", key) for key in envelope["properties"]),
        *(("properties", "delivery_info", key) for key in envelope["properties"]["delivery_info"]),
    ]
    for place in places:
        for value in [*ODD_VALUES, KeyError]:
            mutated = copy.deepcopy(envelope)
            parent = mutated
            for key in place[:-1]:
                parent = parent[key]
            if value is KeyError:
                del parent[place[-1]]
            else:
                parent[place[-1]] = value
            yield mutated


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.slow
def test_junk_on_the_queue_list_is_dropped_and_the_worker_keeps_serving(
    site: ThreadedDemoSite, redis_url: str, postgres_dsn: str, workers: Workers
) -> None:
    envelope = real_envelope(redis_url)
    junk = [*NOT_JSON, *(orjson.dumps(m) for m in mutations(envelope))]
    worker = workers.start(redis_url, postgres_dsn)
    with redis.Redis.from_url(redis_url) as client:
        client.lpush(QUEUE, *junk)
        deadline = time.monotonic() + 20
        while client.llen(QUEUE) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.llen(QUEUE) == 0
    assert worker.process is not None
    assert worker.process.poll() is None, worker.log()[-4000:]
    log = worker.log()
    assert "dropped a broker queue entry that is not JSON" in log
    assert "dropped a broker queue entry on 'http' that is not a message" in log
    assert "Unrecoverable error" not in log
    result = dispatch(
        site.url("quotes"),
        "--redis", redis_url, "--postgres", postgres_dsn,
        "--crawl-id", "after-queue-junk", "--max-pages", "3",
        *FAST,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + worker.log()[-4000:]
    assert worker.process.poll() is None


def test_a_real_envelope_passes_and_broken_ones_are_named() -> None:
    envelope = {
        "body": "W10=",
        "headers": {"task": "t"},
        "properties": {
            "body_encoding": "base64",
            "delivery_tag": "tag",
            "delivery_info": {"exchange": "", "routing_key": "http"},
        },
    }
    assert envelope_problem(envelope) is None
    assert envelope_problem([envelope]) == "a JSON list, not an object"
    broken = copy.deepcopy(envelope)
    broken["properties"]["delivery_info"] = {"routing_key": "http"}
    assert envelope_problem(broken) == "delivery_info has no exchange"
    broken = copy.deepcopy(envelope)
    broken["body"] = "!!"
    assert envelope_problem(broken) == "the body is not base64"
