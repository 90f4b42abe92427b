"""The fetcher a request is fetched with: its own kind, or the one its domain's strategy names.

A domain's strategy slot lives in the store: the lease end that moves its block level moves
the slot too (``frontier/ladder.py``), for every process at once. A process reads it through
``Strategies``: a cache holding each domain's slot for at most ``ttl_s``, which learns the
changes of this process's own lease ends at once from their ``PolicyChange``. It never
writes the slot back.

``fetcher = browser`` on an ``http`` request: a process with a browser fetches it with it; a
process without one hands the lease to the browser lane (``Frontier.move``: one atomic store
step, no attempt counted), where a browser worker or lane claims it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from crawlfleet.clock import Clock
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.ladder import BROWSER, FETCHER_KEY, IMPERSONATE
from crawlfleet.frontier.store_types import PolicyChange

STRATEGY_TTL_S = 2.0
"""How long a domain's strategy read from the store is used before it is read again."""
MAX_CACHED_DOMAINS = 10_000
"""Past this many cached domains the cache starts over (a crawl of very many domains)."""


class Strategies:
    """Each domain's strategy slot as the store had it at most ``ttl_s`` ago."""

    def __init__(self, frontier: Frontier, clock: Clock, ttl_s: float = STRATEGY_TTL_S) -> None:
        self._frontier = frontier
        self._clock = clock
        self._ttl_s = ttl_s
        self._cache: dict[str, tuple[float, Mapping[str, str]]] = {}

    async def of(self, domain: str) -> Mapping[str, str]:
        now = self._clock.now()
        cached = self._cache.get(domain)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        strategy = (await self._frontier.domain(domain)).strategy
        self._keep(domain, now, strategy)
        return strategy

    def learned(self, change: PolicyChange) -> None:
        """Take the strategy a lease end of this process left (when it touched the slot)."""
        if change.strategy is not None:
            self._keep(change.domain, self._clock.now(), change.strategy)

    def wrote(self, domain: str, strategy: Mapping[str, str]) -> None:
        """Take the strategy this process has just written to the store for ``domain``."""
        self._keep(domain, self._clock.now(), strategy)

    def _keep(self, domain: str, at: float, strategy: Mapping[str, str]) -> None:
        if len(self._cache) >= MAX_CACHED_DOMAINS and domain not in self._cache:
            self._cache.clear()
        self._cache[domain] = (at, strategy)


def fetcher_kind(own: str, strategy: Mapping[str, str], served: Collection[str]) -> str:
    """The kind an ``http`` request is fetched with: ``browser`` when its domain's strategy
    names it (served here or not: see the module's docstring), ``impersonate`` when named and
    served here; else the request's own kind."""
    if own != "http":
        return own
    named = strategy.get(FETCHER_KEY)
    if named == BROWSER or (named == IMPERSONATE and IMPERSONATE in served):
        return named
    return own
