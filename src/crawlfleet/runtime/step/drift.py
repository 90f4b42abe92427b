"""Selector drift: a sequential test per (parser, domain) and the circuit breaker it trips.

Each parser with expectations (``parsing/expect.py``) is watched on each domain by a
``DriftTest``: a one-sided Bernoulli CUSUM on "this page missed its expectations", against a
baseline mismatch share it learns from the pair's pages (decision 0051 has the test, its
defaults and their measured false-alarm rate and detection delay). Only a page's first
attempt is observed, so one odd page retried ``max_retries`` times is still one observation.

When a test fires, ``DriftWatch`` writes ``drift.<parser>`` into the domain's strategy slot
(``QueueStore.set_strategy``: the store's per-domain record, read by every process through
``Strategies``): ``paused`` with ``on_drift = "pause"``, ``seen`` with ``"continue"``. A
step whose URL belongs to a paused (parser, domain) is not fetched: it is dead-lettered at
once under ``mismatch: <parser>`` (the crawl goes on, and ends, with everything else).
``resume`` clears the mark and requeues that class's dead letters of the domain.

The tests themselves live in each process (a worker watches the pages it parsed): with
``n`` workers sharing a domain a break is seen within about ``n`` times the one-process
delay. The mark is shared the moment one of them fires.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from crawlfleet.frontier.drift_marks import PAUSED, SEEN, mark_key, paused
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.protocols import DeadLetters
from crawlfleet.monitoring.deadletters import requeue_class
from crawlfleet.runtime.choice.strategy import Strategies

log = logging.getLogger("crawlfleet.runtime.drift")  # its name before #36 (decision 0062)

BASELINE_FLOOR = 0.02
BASELINE_CAP = 0.2
"""Bounds of the learned baseline share: a perfect history still allows odd pages, and a
parser broken from its first page still fires."""
DRIFT_SHARE = 0.5
"""The mismatch share the test is tuned to detect (half the pages or more)."""
THRESHOLD = 15.0
"""The CUSUM level that fires (decision 0051: measured false alarms and delays)."""


@dataclass(slots=True)
class DriftTest:
    """A one-sided Bernoulli CUSUM on mismatches against a baseline share it learns.

    The statistic climbs by ``log(p1/p0)`` on a mismatch and falls by
    ``log((1-p0)/(1-p1))`` on a page that met its expectations, never below 0; it fires at
    ``threshold``. The baseline ``p0`` is the Laplace-smoothed mismatch share of the pages
    that came while the statistic was at rest (0), within ``BASELINE_FLOOR`` and
    ``BASELINE_CAP``: a break lifts the statistic at once, so the break does not teach the
    baseline.
    """

    threshold: float = THRESHOLD
    drift_share: float = DRIFT_SHARE
    pages: int = 0
    mismatches: int = 0
    rest_pages: int = 0
    rest_mismatches: int = 0
    statistic: float = 0.0
    fired_at: int | None = field(default=None)
    """The page (1-based) at which the test fired; None while it has not."""

    @property
    def baseline(self) -> float:
        share = (self.rest_mismatches + 1) / (self.rest_pages + 2)
        return min(max(share, BASELINE_FLOOR), BASELINE_CAP)

    def observe(self, mismatched: bool) -> bool:
        """Take one page; True when this page makes the test fire (once)."""
        self.pages += 1
        self.mismatches += mismatched
        p0, p1 = self.baseline, self.drift_share
        if self.statistic == 0.0:
            self.rest_pages += 1
            self.rest_mismatches += mismatched
        step = math.log(p1 / p0) if mismatched else math.log((1 - p1) / (1 - p0))
        self.statistic = max(0.0, self.statistic + step)
        if self.fired_at is None and self.statistic >= self.threshold:
            self.fired_at = self.pages
            return True
        return False


@dataclass(frozen=True, slots=True)
class DriftOptions:
    """``on_drift`` (``pause`` or ``continue``) and the test's ``threshold``."""

    on_drift: str = "pause"
    threshold: float = THRESHOLD


class DriftWatch:
    """This process's drift tests, one per (parser, domain), and the marks they write."""

    def __init__(self, frontier: Frontier, strategies: Strategies, options: DriftOptions) -> None:
        self._frontier = frontier
        self._strategies = strategies
        self._options = options
        self._tests: dict[tuple[str, str], DriftTest] = {}

    @property
    def pauses(self) -> bool:
        return self._options.on_drift == "pause"

    async def paused(self, parser: str, domain: str) -> bool:
        """Whether ``parser``'s pages on ``domain`` are paused (as the store had it lately)."""
        return paused(await self._strategies.of(domain), parser)

    async def observe(self, parser: str, domain: str, mismatched: bool) -> DriftTest | None:
        """Take a page's first parse; the pair's test when this page made it fire (the mark
        is written by then), else None.

        A test that fired and whose mark was cleared since (``resume``) starts over.
        """
        key = (parser, domain)
        test = self._tests.get(key)
        resumed = test is not None and test.fired_at is not None
        if resumed and mark_key(parser) not in await self._strategies.of(domain):
            test = None
        if test is None:
            test = DriftTest(threshold=self._options.threshold)
            self._tests[key] = test
        if not test.observe(mismatched):
            return None
        strategy = await self._frontier.strategy(domain)
        strategy[mark_key(parser)] = PAUSED if self.pauses else SEEN
        await self._frontier.set_strategy(domain, strategy)
        self._strategies.wrote(domain, strategy)
        log.warning(
            "parser %s drifted on %s after %d pages (%d mismatched; baseline share %.2f): %s",
            parser, domain, test.pages, test.mismatches, test.baseline,
            "its pages are paused (crawlfleet resume-parser)" if self.pauses else "crawl goes on",
        )  # fmt: skip
        return test


class DriftTarget(DeadLetters, Protocol):
    """What ``resume`` needs of a crawl: its strategy slots and its DLQ (``Frontier``)."""

    async def strategy(self, domain: str) -> dict[str, str]: ...

    async def set_strategy(self, domain: str, strategy: Mapping[str, str]) -> None: ...


async def resume(frontier: DriftTarget, parser: str, domain: str) -> int:
    """Clear ``parser``'s drift mark on ``domain`` and requeue its ``mismatch: <parser>``
    dead letters there; returns how many were requeued."""
    strategy = await frontier.strategy(domain)
    strategy.pop(mark_key(parser), None)
    await frontier.set_strategy(domain, strategy)
    return await requeue_class(frontier, f"mismatch: {parser}", domain)
