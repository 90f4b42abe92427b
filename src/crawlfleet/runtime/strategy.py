"""The ``fetcher`` key of a domain's strategy slot, as the crawl step honours it.

The shared contract of the strategy slot (``QueueStore.set_strategy``): ``fetcher`` is
``http``, ``impersonate`` or ``browser``; absent, each request uses its own kind. This step
honours ``browser`` for requests of the HTTP lane: a process with a browser fetches such a
request with it; a process without one hands the lease to the browser lane
(``Frontier.move``: one atomic store step, no attempt counted), where a browser worker
claims it. Other values are the strategy ladder's to honour.

The slot is read from the store at most every ``ttl_s`` per domain and process (the
contract allows a brief cache; nothing is ever written back from it).
"""

from __future__ import annotations

from crawlfleet.clock import Clock
from crawlfleet.frontier.frontier import Frontier

FETCHER_KEY = "fetcher"
TTL_S = 2.0


class StrategyReader:
    """The strategy ``fetcher`` of domains, cached ``ttl_s`` per domain."""

    def __init__(self, frontier: Frontier, clock: Clock, ttl_s: float = TTL_S) -> None:
        self._frontier = frontier
        self._clock = clock
        self._ttl_s = ttl_s
        self._read: dict[str, tuple[float, str | None]] = {}

    async def fetcher(self, domain: str) -> str | None:
        """The fetcher kind the domain's strategy names, or None (each request's own)."""
        now = self._clock.now()
        known = self._read.get(domain)
        if known is not None and now - known[0] < self._ttl_s:
            return known[1]
        kind = (await self._frontier.strategy(domain)).get(FETCHER_KEY)
        self._read[domain] = (now, kind)
        return kind
