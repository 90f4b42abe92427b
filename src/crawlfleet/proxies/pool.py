"""The proxy pool: which proxy of a tier to use next, and what a fetch through one tells.

Health lives in the ``ProxyStateStore`` (shared by every process of the crawl); the pool keeps
a copy of it for at most ``refresh_s`` (its own changes are applied to the copy at once), so a
proxy quarantined by another worker is avoided here within that time. Successes are written
in one batch per proxy every ``refresh_s`` (and by ``flush``): one store write per page cost
a third more CPU per page (decision 0013); a ban or fault is written at once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace

from crawlfleet.clock import Clock
from crawlfleet.proxies.endpoints import ProxyEndpoint
from crawlfleet.proxies.protocols import Cooldown, ProxyState, ProxyStateStore

ROUND_ROBIN = "round_robin"
LEAST_RECENTLY_USED = "least_recently_used"
REFRESH_S = 1.0
SAME_TIME_S = 1e-3
"""Two release times this close were set by one call (Redis keeps 14 significant digits)."""


class ProxyPool:
    """Tiers of endpoints over a shared state store."""

    def __init__(
        self,
        tiers: Sequence[Sequence[ProxyEndpoint]],
        store: ProxyStateStore,
        clock: Clock,
        *,
        rotation: str = ROUND_ROBIN,
        cooldown: Cooldown,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.tiers = [list(tier) for tier in tiers]
        self._by_id = {endpoint.id: endpoint for tier in self.tiers for endpoint in tier}
        self._store = store
        self._clock = clock
        self._rotation = rotation
        self.cooldown = cooldown
        self._refresh_s = refresh_s
        self._states: dict[str, ProxyState] = {}
        self._loaded_at = float("-inf")
        self._turns = [itertools.count() for _ in self.tiers]
        self._pending: dict[str, tuple[int, float]] = {}
        self._flushed_at = clock.now()

    async def register(self) -> None:
        """Record every proxy's tier and address in the store (``crawlfleet proxies`` shows them)."""
        for endpoint in self._by_id.values():
            await self._store.register(endpoint.id, endpoint.tier, endpoint.address)

    def endpoint(self, proxy: str) -> ProxyEndpoint | None:
        return self._by_id.get(proxy)

    async def all(self) -> list[ProxyState]:
        """Every proxy's record as the store has it now (views: metrics, ``crawlfleet proxies``)."""
        return await self._store.all()

    async def states(self) -> dict[str, ProxyState]:
        """Every proxy's record, at most ``refresh_s`` old."""
        now = self._clock.now()
        if now - self._loaded_at >= self._refresh_s:
            self._states = dict(await self._store.load(list(self._by_id)))
            self._loaded_at = now
        return self._states

    async def usable(self, proxy: str) -> bool:
        """Whether ``proxy`` is known and not quarantined now."""
        state = (await self.states()).get(proxy)
        return state is not None and not state.quarantined(self._clock.now())

    async def choose(self, tier: int) -> ProxyEndpoint | None:
        """The next proxy of ``tier`` by the rotation, or None when all are quarantined."""
        states = await self.states()
        now = self._clock.now()
        free = [e for e in self.tiers[tier] if not states[e.id].quarantined(now)]
        if not free:
            return None
        if self._rotation == LEAST_RECENTLY_USED:
            chosen = min(free, key=lambda e: states[e.id].last_used)
        else:
            chosen = free[next(self._turns[tier]) % len(free)]
        # Seen as used at once, so the next pick of this process takes another one.
        self._states[chosen.id] = replace(states[chosen.id], last_used=now)
        return chosen

    async def earliest_release(self, tier: int) -> float:
        """When the first quarantined proxy of ``tier`` is released (epoch s)."""
        states = await self.states()
        return min(states[e.id].quarantined_until for e in self.tiers[tier])

    async def success(self, endpoint: ProxyEndpoint, latency_s: float) -> None:
        """Count a fetch that was not blocked (written with the next batch)."""
        count, total_s = self._pending.get(endpoint.id, (0, 0.0))
        self._pending[endpoint.id] = (count + 1, total_s + latency_s)
        if self._clock.now() - self._flushed_at >= self._refresh_s:
            await self.flush()

    async def flush(self) -> None:
        """Write the successes counted since the last batch."""
        pending, self._pending = self._pending, {}
        self._flushed_at = now = self._clock.now()
        for proxy, (count, total_s) in pending.items():
            state = await self._store.success(proxy, now, total_s / count, count)
            self._states[proxy] = state

    async def penalize(
        self, endpoint: ProxyEndpoint, *, error: bool, quarantine: bool
    ) -> tuple[ProxyState, bool]:
        """Count a ban signal or proxy fault; quarantine it if ``quarantine``.

        Returns its record and whether this call began its quarantine (False when it was
        quarantined already, by this process or another: its release was set at another time).
        """
        now = self._clock.now()
        state = await self._store.penalize(
            endpoint.id, now, error=error, quarantine=quarantine, cooldown=self.cooldown
        )
        self._states[endpoint.id] = state
        began = now + self.cooldown.after(state.strikes)
        return state, quarantine and abs(state.quarantined_until - began) < SAME_TIME_S
