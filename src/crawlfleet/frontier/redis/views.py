"""Read the Redis store's hashes back as the contract's values, and write its script arguments."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import orjson

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.accounting import expired_attempt, expired_counters, report_counters
from crawlfleet.frontier.drift import DriftTest
from crawlfleet.frontier.policy import (
    delay_source,
    escalation_reason,
    refused_again,
    window_mark,
)
from crawlfleet.frontier.store_types import (
    DelaySource,
    DomainPolicy,
    DomainView,
    PolicyChange,
    Report,
)
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Outcome

Arg = str | int | float


def domain_view(
    domain: str, record: Mapping[str, str], stats: Mapping[str, str], default: DomainPolicy
) -> DomainView:
    """A ``DomainView`` from the ``{p}:domain:<d>`` and ``{p}:dstats:<d>`` hashes."""
    base = float(record.get("delay", default.delay_s))
    level = int(record.get("level", 0))
    strategy = record.get("strategy")
    return DomainView(
        domain=domain,
        base_delay_s=base,
        delay_source=delay_source(DelaySource(record.get("source", "config")), default),
        max_in_flight=int(record.get("max", default.max_in_flight)),
        level=level,
        effective_delay_s=base * 2**level,
        ready_at=float(record.get("ready_at", 0.0)),
        cooldown_until=float(record.get("cooldown", 0.0)),
        block_reason=record.get("reason", ""),
        retry_after_until=float(record.get("retry_until", 0.0)),
        strategy=orjson.loads(strategy) if strategy else {},
        queued=int(record.get("queued", 0)),
        in_flight=int(record.get("inflight", 0)),
        stats=crawl_stats(stats),
        drift=drift_tests(record.get("drift")),
    )


def drift_tests(raw: str | None) -> dict[str, DriftTest]:
    """Parser -> drift test from a domain record's ``drift`` field (``lua/drift.lua``)."""
    found = orjson.loads(raw) if raw else {}
    return {parser: DriftTest.from_json(test) for parser, test in found.items()}


def crawl_stats(counters: Mapping[str, str], started_at: str | None = None) -> CrawlStats:
    return CrawlStats(
        counters={name: float(value) for name, value in counters.items()},
        started_at=None if started_at is None else float(started_at),
    )


def counters_json(counters: Mapping[str, float]) -> str:
    """The scripts' counters argument: a JSON object, name -> number."""
    return orjson.dumps(dict(counters)).decode()


def report_args(report: Report, default: DomainPolicy) -> list[Arg]:
    """``finish.lua``'s ARGV from its 7th on: the report, the default policy, the counters."""
    rules = default.blocks
    attempt = report.attempt
    return [
        window_mark(report),
        report.reason,
        float(report.block_until),
        0 if attempt.outcome is Outcome.SKIPPED else 1,
        float(attempt.at),
        float(default.delay_s),
        rules.window,
        rules.min_samples,
        float(rules.threshold),
        rules.recover_after,
        rules.max_level,
        float(rules.cooldown_s),
        orjson.dumps(attempt).decode(),  # the same JSON as ``attempt.to_dict()``, faster
        counters_json(report_counters(report)),
        ",".join(rules.ladder),
        float(rules.refusal_threshold),
        rules.refusal_kinds,
        1 if refused_again(report) else 0,
    ]


def policy_change(
    domain: str, reply: list[str | int], report: Report, default: DomainPolicy
) -> PolicyChange:
    """The ``PolicyChange`` of ``finish.lua``'s reply.

    The reply is ``{1, change, level, count, n, until, rung, strategy JSON, rule, kinds}``.
    """
    _, change, level, count, judged, until, rung, strategy, rule, kinds = reply
    moved = orjson.loads(str(strategy)) if strategy else None
    if change == "escalated":
        reason = escalation_reason(str(rule), int(count), int(judged), int(kinds), report.reason)
        return PolicyChange(domain, int(level), "escalated", reason, float(until), str(rung), moved)
    reason = f"{default.blocks.recover_after} clean responses in a row"
    return PolicyChange(domain, int(level), "recovered", reason, 0.0, str(rung), moved)


def reap_counter_args() -> list[Arg]:
    """``reap.lua``'s counter arguments: a requeued request's, then a dead one's.

    The counters of an expired lease depend only on whether its request dies.
    """
    any_request = CrawlRequest("", "", "")
    return [
        counters_json(expired_counters(expired_attempt(any_request, dies, 0.0)))
        for dies in (False, True)
    ]


_NESTED = ("data", "headers")
_FIELDS = tuple(f.name for f in dataclasses.fields(CrawlRequest))
"""Request fields stored as JSON text inside the request's JSON: the scripts decode and
re-encode a request (``reap.lua``), and cjson would turn an empty list of the context into
an object and round floats to 14 digits; a string passes through unchanged."""


def dumps(request: CrawlRequest) -> str:
    """The request as stored: ``to_dict``'s JSON with ``data`` and ``headers`` as JSON strings.

    Built field by field: ``dataclasses.asdict`` (``to_dict``) deep-copies, and a worker
    serializes every link of every page (most of them already seen) through here.
    """
    fields = {name: getattr(request, name) for name in _FIELDS}
    for name in _NESTED:
        fields[name] = orjson.dumps(fields[name]).decode()
    return orjson.dumps(fields).decode()


def loads(raw: str | bytes) -> CrawlRequest:
    """The request of ``dumps``; one stored before requests had a payload reads as a GET."""
    fields = orjson.loads(raw)
    for name in _NESTED:
        if name in fields:
            fields[name] = orjson.loads(fields[name])
    return CrawlRequest.from_dict(fields)
