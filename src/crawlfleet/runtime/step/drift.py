"""Selector drift: the circuit breaker the drift tests trip, and ``resume``.

Each parser with expectations (``parsing/expect.py``) is watched on each domain by a drift
test (``frontier/drift.py``: a one-sided Bernoulli CUSUM on "this page missed its
expectations", against a baseline mismatch share it learns; decision 0051 has its defaults
and their measured false-alarm rate and detection delay). Only a page's first attempt is
observed, so one odd page retried ``max_retries`` times is still one observation.

The test lives in the store, in the domain's record (``Frontier.observe_drift``): every
process of a crawl feeds the same test, so n workers sharing a domain catch a break within
the same number of pages as one, and a resumed or recrawled crawl keeps its baseline. When
it fires, the store writes ``drift.<parser>`` into the domain's strategy slot in the same
step (read by every process through ``Strategies``): ``paused`` with ``on_drift = "pause"``,
``seen`` with ``"continue"``. A step whose URL belongs to a paused (parser, domain) is not
fetched: it is dead-lettered at once under ``mismatch: <parser>`` (the crawl goes on, and
ends, with everything else). ``resume`` clears the mark and requeues that class's dead
letters of the domain; the test then starts over (its baseline kept) at its next page.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from crawlfleet.frontier.drift import THRESHOLD, DriftPage, DriftRule, DriftTest
from crawlfleet.frontier.drift_marks import PAUSED, SEEN, mark_key, paused
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.protocols import DeadLetters
from crawlfleet.monitoring.deadletters import requeue_class
from crawlfleet.runtime.choice.strategy import Strategies

log = logging.getLogger("crawlfleet.runtime.drift")  # its name before #36 (decision 0062)


@dataclass(frozen=True, slots=True)
class DriftOptions:
    """``on_drift`` (``pause`` or ``continue``) and the test's ``threshold``."""

    on_drift: str = "pause"
    threshold: float = THRESHOLD


class DriftWatch:
    """Feeds the crawl's drift tests (in its store) and reads the marks they write."""

    def __init__(self, frontier: Frontier, strategies: Strategies, options: DriftOptions) -> None:
        self._frontier = frontier
        self._strategies = strategies
        self._options = options
        self._rule = DriftRule(PAUSED if self.pauses else SEEN, options.threshold)

    @property
    def pauses(self) -> bool:
        return self._options.on_drift == "pause"

    async def paused(self, parser: str, domain: str) -> bool:
        """Whether ``parser``'s pages on ``domain`` are paused (as the store had it lately)."""
        return paused(await self._strategies.of(domain), parser)

    async def observe(self, parser: str, domain: str, page: DriftPage) -> DriftTest | None:
        """Take a page's first parse; the pair's test when this page made it fire (the mark
        is written by then), else None.

        Whenever the test has fired (here or in another process) and this process's
        strategy cache does not show the mark yet, the cache reads it again: a worker
        learns of another's firing at its next page on the domain, not ``ttl_s`` later.
        """
        test = await self._frontier.observe_drift(domain, parser, page, self._rule)
        if test.fired_at is None:
            return None
        if test.just_fired or mark_key(parser) not in await self._strategies.of(domain):
            self._strategies.wrote(domain, await self._frontier.strategy(domain))
        if not test.just_fired:
            return None
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
