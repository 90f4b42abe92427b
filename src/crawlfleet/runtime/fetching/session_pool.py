"""The crawl sessions of each domain: which one a request takes, made, retired or waited for.

A crawl session is a proxy (or ``direct``) of the domain's current tier, a header profile
(``fetchers/profiles.py``) and a cookie jar, kept in the ``CrawlSessionStore`` so that a resumed
crawl, and every worker, finds it again. Each domain has up to ``sessions_per_domain`` live
sessions, used in turn. The domain's strategy slot (shared contract, written by whoever owns
the key) decides: ``tier`` (absent: 0) picks the tier; a larger ``session_epoch`` retires every
session made under a smaller one; a session whose proxy is quarantined is retired too.

When every proxy of the tier is quarantined, the domain's ``tier`` moves to the next tier (read,
change, write back the whole mapping, unless someone moved it already); on the last tier the
request waits (one log line) until the earliest release, at most ``max_wait_s``, then fails
with ``NoProxyFree`` (transient). Nothing here spins.
"""

from __future__ import annotations

import asyncio
import logging
import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from crawlfleet.clock import Clock
from crawlfleet.errors import FetchError
from crawlfleet.fetchers.profiles import pick_profile
from crawlfleet.proxies.endpoints import ProxyEndpoint
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.sessions.protocols import CrawlSession, CrawlSessionStore

log = logging.getLogger("crawlfleet.runtime.session_pool")  # its name before #36 (decision 0062)

TIER = "tier"
SESSION_EPOCH = "session_epoch"
STRATEGY_TTL_S = 1.0
"""How long a read of a domain's strategy slot is used before it is read again."""


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """The crawl sessions' rules, from ``[crawl.proxies]`` (``fetching.chain.session_options``;
    the defaults are ``ProxySettings``').

    ``sessions_per_domain`` live sessions a domain uses in turn; ``profiles``: header profile
    names to draw from (empty: all); ``max_wait_s``: longest a request waits for a quarantined
    last tier; ``ban_after`` blocks in a row through one proxy quarantine it even when no other
    proxy succeeded on the domain (``SessionFetcher``).
    """

    sessions_per_domain: int = 4
    profiles: tuple[str, ...] = ()
    max_wait_s: float = 60.0
    ban_after: int = 2


class StrategySlot(Protocol):
    """A domain's shared strategy mapping (``Frontier.domain(...).strategy``)."""

    async def read(self, domain: str) -> Mapping[str, str]: ...

    async def write(self, domain: str, strategy: Mapping[str, str]) -> None: ...


class NoProxyFree(FetchError):
    """Every proxy of the domain's last tier stayed quarantined past ``max_wait_s``."""


def tier_of(strategy: Mapping[str, str]) -> int:
    return _number(strategy.get(TIER))


def epoch_of(strategy: Mapping[str, str]) -> int:
    return _number(strategy.get(SESSION_EPOCH))


def _number(value: str | None) -> int:
    try:
        return max(0, int(value)) if value is not None else 0
    except ValueError:
        return 0


class SessionPool:
    """The live crawl sessions of every domain this process fetches, over the shared stores."""

    def __init__(
        self,
        pool: ProxyPool,
        sessions: CrawlSessionStore,
        strategy: StrategySlot,
        clock: Clock,
        options: SessionOptions,
        *,
        rng: random.Random | None = None,
    ) -> None:
        self._pool = pool
        self._store = sessions
        self._strategy = strategy
        self._clock = clock
        self._options = options
        self._rng = rng or random.Random()
        self._live: dict[str, list[CrawlSession]] = {}
        self._turn: dict[str, int] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._strategies: dict[str, tuple[float, Mapping[str, str]]] = {}

    async def take(self, domain: str) -> tuple[CrawlSession, ProxyEndpoint]:
        """A live session of the domain's current tier and epoch (made or waited for)."""
        async with self._locks.setdefault(domain, asyncio.Lock()):
            waited = False
            while True:
                strategy = await self._read_strategy(domain)
                tier = min(tier_of(strategy), len(self._pool.tiers) - 1)
                live = await self._live_sessions(domain, tier, epoch_of(strategy))
                if len(live) < self._options.sessions_per_domain:
                    made = await self._new_session(domain, tier, epoch_of(strategy))
                    if made is not None:
                        live.append(made)
                if live:
                    turn = self._turn.get(domain, 0)
                    self._turn[domain] = turn + 1
                    chosen = live[turn % len(live)]
                    endpoint = self._pool.endpoint(chosen.proxy)
                    assert endpoint is not None  # _live_sessions keeps known proxies only
                    return chosen, endpoint
                if tier + 1 < len(self._pool.tiers):
                    await self._next_tier(domain, tier)
                    continue
                if waited:
                    until = await self._pool.earliest_release(tier)
                    raise NoProxyFree(
                        f"{domain}: every proxy of tier {tier} is quarantined until {until:.0f}"
                    )
                await self._wait(domain, tier)
                waited = True

    async def retire(self, session: CrawlSession) -> None:
        """Forget ``session`` here and in the store (a block or a fault through it)."""
        live = self._live.get(session.domain, [])
        self._live[session.domain] = [s for s in live if s.id != session.id]
        await self._store.retire(session.domain, session.id)

    async def keep(self, session: CrawlSession) -> None:
        """Store ``session`` (its cookies changed), unless it was retired meanwhile."""
        live = self._live.get(session.domain, [])
        if all(s.id != session.id for s in live):
            return  # retired while a fetch through it was in flight: not stored again
        self._live[session.domain] = [session if s.id == session.id else s for s in live]
        await self._store.put(session)

    async def _live_sessions(self, domain: str, tier: int, epoch: int) -> list[CrawlSession]:
        if domain not in self._live:
            self._live[domain] = await self._store.crawl_sessions(domain)
        kept: list[CrawlSession] = []
        for session in self._live[domain]:
            stale = session.epoch < epoch or session.tier != tier
            if stale or not await self._pool.usable(session.proxy):
                await self._store.retire(domain, session.id)
            else:
                kept.append(session)
        self._live[domain] = kept
        return list(kept)

    async def _new_session(self, domain: str, tier: int, epoch: int) -> CrawlSession | None:
        endpoint = await self._pool.choose(tier)
        if endpoint is None:
            return None
        chosen = pick_profile(self._rng, self._options.profiles)
        session = CrawlSession(secrets.token_hex(6), domain, endpoint.id, tier, chosen.name, epoch)
        self._live.setdefault(domain, []).append(session)
        await self._store.put(session)
        return session

    async def _read_strategy(self, domain: str) -> Mapping[str, str]:
        now = self._clock.now()
        cached = self._strategies.get(domain)
        if cached is not None and now - cached[0] < STRATEGY_TTL_S:
            return cached[1]
        strategy = dict(await self._strategy.read(domain))
        self._strategies[domain] = (now, strategy)
        return strategy

    async def _next_tier(self, domain: str, tier: int) -> None:
        """Move the domain from ``tier`` to the next one (unless someone already moved it)."""
        current = dict(await self._strategy.read(domain))
        if tier_of(current) <= tier:
            current[TIER] = str(tier + 1)
            await self._strategy.write(domain, current)
            log.warning(
                "%s: every proxy of tier %d is quarantined; moving to tier %d",
                domain, tier, tier + 1,
            )  # fmt: skip
        self._strategies[domain] = (self._clock.now(), current)

    async def _wait(self, domain: str, tier: int) -> None:
        until = await self._pool.earliest_release(tier)
        wait_s = max(0.0, min(until - self._clock.now(), self._options.max_wait_s))
        log.warning(
            "%s: every proxy of the last tier (%d) is quarantined; waiting %.1f s for the"
            " earliest release",
            domain, tier, wait_s,
        )  # fmt: skip
        await self._clock.sleep(wait_s)
