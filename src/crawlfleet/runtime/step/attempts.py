"""What a crawl step ends with: its ``Attempt``, the events of its end, its item counters.

The order of the step stays in ``runtime/step/crawler.py``; the records it ends with are built
here, by plain functions of the ``Step`` it carries.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from crawlfleet.counters import LIMIT_UNITS, Counters, dropped_counter
from crawlfleet.events import DomainEscalated, DomainRecovered, EventBus, FetchAttempted
from crawlfleet.frontier.drift import DriftPage
from crawlfleet.frontier.store_types import Ended, Signal, Visit
from crawlfleet.models import FetchResult, Lease, ParseResult, Route
from crawlfleet.parsing.expect import Expect, filled
from crawlfleet.pipeline.pipeline import PipelineOutcome
from crawlfleet.records import Attempt, Outcome
from crawlfleet.runtime.choice.strategy import Strategies

log = logging.getLogger("crawlfleet.runtime.attempts")  # its name before #36 (decision 0062)

ITEM_FATES = ("stored", "invalid", "duplicate")
"""The item fates counted in the statistics (``items.<fate>.<type>``)."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one step knows when it ends, for its attempt and report."""

    lease: Lease
    started: float
    result: FetchResult | None = None
    signal: Signal = Signal.NONE
    reason: str = ""
    route: Route | None = None
    kind: str = ""
    """The fetcher kind that fetched (``""``: the request's own)."""
    screenshot: str | None = None
    visit: Visit | None = None


def attempt_of(
    step: Step, outcome: Outcome, error: str | None, detail: str | None, worker: str, now: float
) -> Attempt:
    """The attempt ``worker`` records at ``now`` for a step."""
    request = step.lease.request
    result = step.result
    route = result.route if result is not None else step.route
    return Attempt(
        url=request.url,
        fingerprint=request.fingerprint,
        domain=request.domain,
        worker=worker,
        outcome=outcome,
        status=result.status if result is not None else None,
        bytes=len(result.body) if result is not None else 0,
        latency_s=result.elapsed_s if result is not None else now - step.started,
        retry=request.attempt,
        at=now,
        error=error,
        fetcher=result.fetcher if result is not None else (step.kind or request.fetcher),
        detail=detail,
        session_id=route.session_id if route is not None else None,
        proxy_id=route.proxy_id if route is not None else None,
        tier=route.tier if route is not None else None,
        screenshot=result.screenshot if result is not None else step.screenshot,
    )


def announce(
    attempt: Attempt, ended: Ended, events: EventBus, strategies: Strategies | None
) -> None:
    """Tell in-process subscribers what the store recorded (nothing for a lost lease)."""
    if not ended:
        log.warning("lease of %s ended elsewhere; its outcome was not recorded", attempt.url)
        return
    events.emit(FetchAttempted(attempt))
    change = ended.change
    if change is None:
        return
    if strategies is not None:
        strategies.learned(change)
    if change.rung:
        log.info(
            "domain %s %s to level %d, rung %s: %s",
            change.domain, change.change, change.level, change.rung, change.reason,
        )  # fmt: skip
    if change.change == "escalated":
        events.emit(
            DomainEscalated(change.domain, change.level, change.reason, change.until, change.rung)
        )
    else:
        events.emit(DomainRecovered(change.domain, change.level, change.reason, change.rung))


def item_counters(outcome: PipelineOutcome) -> Counters:
    """The ``items.<fate>.<type>`` counters of one page's pipeline outcome."""
    counters: Counters = {}
    for item_type, fates in outcome.by_type.items():
        for fate in ITEM_FATES:
            count = fates.get(fate, 0)
            if count:
                counters[f"items.{fate}.{item_type}"] = count
    for change in outcome.schema_changes:
        name = f"schema_changes.{change.item_type}"
        counters[name] = counters.get(name, 0) + 1
    return counters


def quality_counters(parser: str, expect: Expect, parsed: ParseResult) -> Counters:
    """The ``mismatch.<p>`` and ``quality.<p>.*`` counters of one page's first parse by
    ``parser`` (``counters`` module docstring)."""
    prefix = f"quality.{parser}"
    counters: Counters = {f"{prefix}.pages": 1, f"{prefix}.items": len(parsed.items)}
    if parsed.unmet:
        counters[f"mismatch.{parser}"] = 1
    else:
        counters[f"{prefix}.met"] = 1
    for name in expect.fields:  # 0 too: a field no item fills still has its rate
        counters[f"{prefix}.filled.{name}"] = sum(filled(item, name) for item in parsed.items)
    return counters


def drift_page(expect: Expect, parsed: ParseResult) -> DriftPage:
    """One page's first parse as its parser's drift test takes it."""
    fields = {name: sum(filled(item, name) for item in parsed.items) for name in expect.fields}
    return DriftPage(bool(parsed.unmet), len(parsed.items), fields)


def limits_note(counters: Counters, links: int) -> str | None:
    """The attempt log's account of what limits dropped from a page of ``links`` links
    (``max_links_per_page: kept 100000 of 123456 links; max_depth: 40 links``), or None."""
    parts = []
    for limit in LIMIT_UNITS:
        count = int(counters.get(dropped_counter(limit), 0))
        if count:
            parts.append(f"{limit.value}: {count} {LIMIT_UNITS[limit]}")
    if not parts:
        return None
    return f"dropped by limits from {links} links: " + "; ".join(parts)
