"""The in-memory proxy state store: a dict, for tests and one-process tools."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from crawlfleet.proxies.protocols import Cooldown, ProxyState, penalized, succeeded


class MemoryProxyStates:
    """A ``ProxyStateStore`` in a dict."""

    def __init__(self) -> None:
        self._states: dict[str, ProxyState] = {}

    async def register(self, proxy: str, tier: int, label: str) -> None:
        state = self._states.get(proxy, ProxyState(proxy))
        self._states[proxy] = replace(state, tier=tier, label=label)

    async def all(self) -> list[ProxyState]:
        return sorted(self._states.values(), key=lambda state: state.id)

    async def load(self, ids: list[str]) -> Mapping[str, ProxyState]:
        return {proxy: self._states.get(proxy, ProxyState(proxy)) for proxy in ids}

    async def success(self, proxy: str, now: float, latency_s: float, count: int = 1) -> ProxyState:
        state = succeeded(self._states.get(proxy, ProxyState(proxy)), now, latency_s, count)
        self._states[proxy] = state
        return state

    async def penalize(
        self, proxy: str, now: float, *, error: bool, quarantine: bool, cooldown: Cooldown
    ) -> ProxyState:
        state = penalized(
            self._states.get(proxy, ProxyState(proxy)),
            now,
            error=error,
            quarantine=quarantine,
            cooldown=cooldown,
        )
        self._states[proxy] = state
        return state

    async def close(self) -> None:
        return None
