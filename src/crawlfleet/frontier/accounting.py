"""What a lease end or a refused admission adds to the statistics and the attempt log, the
same in every store."""

from __future__ import annotations

from crawlfleet import counters
from crawlfleet.counters import Counters, Limit, dropped_counter
from crawlfleet.frontier.store_types import LEASE_EXPIRED, Report, Signal
from crawlfleet.models import CrawlRequest
from crawlfleet.records import Attempt, Outcome

OVER_TOTAL = dropped_counter(Limit.MAX_PAGES)
OVER_DOMAIN = dropped_counter(Limit.MAX_PAGES_PER_DOMAIN)
"""The counters of a new request ``add`` refused past the budget, in total or in its domain
(added to that domain; ``lua/add.lua`` writes the same names)."""


def report_counters(report: Report) -> Counters:
    """The counters of ``report.attempt`` (a block when signalled) merged with its own."""
    added = counters.for_attempt(report.attempt, blocked=report.signal is Signal.BLOCK)
    counters.merge(added, report.counters)
    return added


def expired_attempt(request: CrawlRequest, dies: bool, expired_at: float) -> Attempt:
    """The attempt ``reap`` records for a lease of ``request`` that ran out at ``expired_at``."""
    return Attempt(
        url=request.url,
        fingerprint=request.fingerprint,
        domain=request.domain,
        worker="?",
        outcome=Outcome.DEAD if dies else Outcome.RETRY,
        status=None,
        bytes=0,
        latency_s=0.0,
        retry=request.attempt,
        at=expired_at,
        error=LEASE_EXPIRED,
        fetcher=request.fetcher,
    )


def expired_counters(attempt: Attempt) -> Counters:
    """The counters of an expired lease's attempt."""
    return {**counters.for_attempt(attempt), "lease_expired": 1}
