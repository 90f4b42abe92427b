"""How the values of a crawl map to the rows of its SQLite state file (``schema.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from crawlfleet.frontier.drift import DriftTest
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.sqlite.statements import REQUEST_COLUMN_COUNT
from crawlfleet.frontier.store_types import DelaySource, Visit
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, DeadLetter


def request(row: Sequence[Any]) -> CrawlRequest:
    """A request from the ``REQUEST_COLUMNS`` at the start of ``row``."""
    fp, url, domain, depth, priority, attempt, fetcher, parent = row[:8]
    data, method, body, headers = row[8:12]
    return CrawlRequest(
        url,
        fp,
        domain,
        depth,
        priority,
        attempt,
        fetcher,
        parent,
        data=json.loads(data),
        method=method,
        body=body,
        headers=json.loads(headers),
    )


def dead_letter(row: Sequence[Any]) -> DeadLetter:
    """A dead letter from a ``DEAD_LETTERS`` row: the request columns, errors, died_at."""
    n = REQUEST_COLUMN_COUNT
    return DeadLetter(request(row), tuple(json.loads(row[n])), row[n + 1])


def request_row(r: CrawlRequest) -> tuple[Any, ...]:
    """The ``REQUEST_COLUMNS`` of a request."""
    head = (r.fingerprint, r.url, r.domain, r.depth, r.priority, r.attempt, r.fetcher, r.parent)
    return (*head, _json(r.data), r.method, r.body, _json(r.headers))


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) if value else "{}"


def attempt_row(a: Attempt) -> tuple[Any, ...]:
    """The ``ATTEMPT_COLUMNS`` of an attempt."""
    head = (a.url, a.fingerprint, a.domain, a.worker, a.outcome.value, a.status, a.bytes)
    return (*head, a.latency_s, a.retry, a.at, a.error, a.fetcher, a.detail, a.session_id,
            a.proxy_id, a.tier, a.screenshot)  # fmt: skip


def record(row: Sequence[Any]) -> PolicyRecord:
    """A policy record from the ``POLICY_COLUMNS`` of ``row``."""
    delay_s, source, cap, level, window, streak, cooldown, reason, retry_after, strategy, drift = (
        row
    )
    return PolicyRecord(
        delay_s,
        DelaySource(source),
        cap,
        level,
        window,
        streak,
        cooldown,
        reason,
        retry_after,
        json.loads(strategy),
        {parser: DriftTest.from_json(test) for parser, test in json.loads(drift).items()},
    )


def policy_row(domain: str, r: PolicyRecord) -> tuple[Any, ...]:
    """``domain`` and the ``POLICY_COLUMNS`` of its record."""
    head = (domain, r.base_delay_s, r.delay_source.value, r.max_in_flight, r.level, r.window)
    return (*head, r.streak, r.cooldown_until, r.block_reason, r.retry_after_until,
            json.dumps(r.strategy),
            json.dumps({parser: test.to_json() for parser, test in r.drift.items()}))  # fmt: skip


def parse_token(token: str) -> tuple[str, int] | None:
    fp, _, n = token.rpartition(":")
    return (fp, int(n)) if fp and n.isdigit() else None


def json_or_null(fingerprints: Sequence[str] | None) -> str | None:
    return None if fingerprints is None else json.dumps(list(fingerprints))


def visit_row(v: Visit) -> tuple[Any, ...]:
    """The ``known`` columns after ``fp`` of a visit (an infinite time is NULL)."""
    return (v.etag, v.last_modified, v.content_hash, _finite(v.interval_s), _finite(v.next_at),
            v.priority, json.dumps(list(v.item_types)), v.visited_at)  # fmt: skip


def visit(row: Sequence[Any]) -> Visit:
    """A visit from a ``VISIT`` row."""
    etag, last_modified, content_hash, interval_s, next_at, priority, item_types, at = row
    inf = float("inf")
    return Visit(etag, last_modified, content_hash,
                 inf if interval_s is None else interval_s,
                 inf if next_at is None else next_at, priority,
                 tuple(json.loads(item_types)), at)  # fmt: skip


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None
