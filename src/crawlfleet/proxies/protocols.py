"""The proxy state port: each proxy's health, shared by every process of a crawl.

Implementations: ``memory.MemoryProxyStates`` (tests, one process), ``sqlite.SqliteProxyStates``
(the embedded crawl: the ``proxies`` table of ``state.sqlite``), ``redis.RedisProxyStates``
(distributed: ``{p}:proxies``, see ``frontier/redis/keys.py``). One contract suite
(``tests/contract/test_proxy_states.py``) runs on all three; each change of one proxy is
atomic (a transaction, or one Lua script).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Cooldown:
    """How long a quarantine lasts: ``base_s`` x 2^(strikes - 1), at most ``max_s``."""

    base_s: float
    max_s: float

    def after(self, strikes: int) -> float:
        return float(min(self.max_s, self.base_s * 2 ** max(0, strikes - 1)))


@dataclass(frozen=True, slots=True)
class ProxyState:
    """One proxy's record. Never holds its URL or credentials.

    ``strikes`` counts its quarantines (the next one lasts twice as long, up to the cap);
    ``latency_s`` is a moving average of its successful fetches (0 before the first);
    ``last_used`` is when a fetch through it last ended (epoch s, 0 never). ``tier`` and
    ``label`` (``host:port``, or ``direct``) are what the crawl registered it with.
    """

    id: str
    successes: int = 0
    bans: int = 0
    errors: int = 0
    strikes: int = 0
    quarantined_until: float = 0.0
    last_used: float = 0.0
    latency_s: float = 0.0
    tier: int = 0
    label: str = ""

    def quarantined(self, now: float) -> bool:
        return self.quarantined_until > now


LATENCY_WEIGHT = 0.2
"""Weight of one new sample in the latency moving average."""


def succeeded(state: ProxyState, now: float, latency_s: float, count: int = 1) -> ProxyState:
    """``state`` after ``count`` fetches through it that were not blocked (mean ``latency_s``)."""
    latency = (
        latency_s
        if state.successes == 0
        else ((1 - LATENCY_WEIGHT) * state.latency_s + LATENCY_WEIGHT * latency_s)
    )
    return replace(
        state, successes=state.successes + count, last_used=max(state.last_used, now),
        latency_s=latency,
    )  # fmt: skip


def penalized(
    state: ProxyState, now: float, *, error: bool, quarantine: bool, cooldown: Cooldown
) -> ProxyState:
    """``state`` after a ban signal (``error`` False) or a proxy fault (``error`` True).

    With ``quarantine`` it is quarantined for ``cooldown.after(strikes + 1)``; a proxy already
    quarantined keeps its release time and strikes (the answers of requests that were in
    flight when it was quarantined do not lengthen it).
    """
    bans = state.bans + (0 if error else 1)
    errors = state.errors + (1 if error else 0)
    strikes, until = state.strikes, state.quarantined_until
    if quarantine and not state.quarantined(now):
        strikes += 1
        until = now + cooldown.after(strikes)
    return replace(
        state, bans=bans, errors=errors, strikes=strikes, quarantined_until=until,
        last_used=max(state.last_used, now),
    )  # fmt: skip


class ProxyStateStore(Protocol):
    """Proxy records by id; an id never seen reads as a fresh ``ProxyState``.

    ``register`` records a proxy's tier and label (its health is kept); ``success`` (``count``
    fetches, their mean latency) and ``penalize`` change one proxy atomically (the rules of ``succeeded`` and ``penalized``)
    and return its new record. ``load`` returns the records of ``ids`` (every one present);
    ``all`` every record ever written, by id. ``StateError`` when the store cannot be used.
    """

    async def register(self, proxy: str, tier: int, label: str) -> None: ...

    async def load(self, ids: list[str]) -> Mapping[str, ProxyState]: ...

    async def all(self) -> list[ProxyState]: ...

    async def success(
        self, proxy: str, now: float, latency_s: float, count: int = 1
    ) -> ProxyState: ...

    async def penalize(
        self, proxy: str, now: float, *, error: bool, quarantine: bool, cooldown: Cooldown
    ) -> ProxyState: ...

    async def close(self) -> None: ...
