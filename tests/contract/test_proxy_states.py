"""One contract suite over every ``ProxyStateStore``: memory, SQLite (state file), Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from uuid import uuid4

import pytest

from crawlfleet.proxies.memory import MemoryProxyStates
from crawlfleet.proxies.protocols import Cooldown, ProxyState, ProxyStateStore

NOW = 1_000_000.0
COOLDOWN = Cooldown(base_s=10.0, max_s=35.0)


@pytest.fixture(params=["memory", "sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def states(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ProxyStateStore]:
    if request.param == "memory":
        yield MemoryProxyStates()
        return
    if request.param == "sqlite":
        from crawlfleet.proxies.sqlite import SqliteProxyStates

        store = await SqliteProxyStates.open(tmp_path / "state.sqlite")
        yield store
        await store.close()
        return
    from crawlfleet.proxies.redis import RedisProxyStates

    redis_store = RedisProxyStates.open(
        request.getfixturevalue("redis_url"), f"crawlfleet:{{t{uuid4().hex}}}"
    )
    yield redis_store
    await redis_store.close()


async def test_an_unknown_proxy_reads_fresh(states: ProxyStateStore) -> None:
    assert await states.load(["px-a", "px-b"]) == {
        "px-a": ProxyState("px-a"),
        "px-b": ProxyState("px-b"),
    }


async def test_successes_count_and_average_latency(states: ProxyStateStore) -> None:
    await states.success("px-a", NOW, 0.5)
    state = await states.success("px-a", NOW + 1, 1.5)
    assert (state.successes, state.last_used) == (2, NOW + 1)
    assert state.latency_s == pytest.approx(0.8 * 0.5 + 0.2 * 1.5)
    assert (await states.load(["px-a"]))["px-a"] == state


async def test_a_batch_of_successes_counts_whole(states: ProxyStateStore) -> None:
    state = await states.success("px-a", NOW, 0.25, count=7)
    assert (state.successes, state.latency_s) == (7, 0.25)


async def test_a_ban_without_quarantine_only_counts(states: ProxyStateStore) -> None:
    state = await states.penalize("px-a", NOW, error=False, quarantine=False, cooldown=COOLDOWN)
    assert (state.bans, state.errors, state.strikes, state.quarantined(NOW)) == (1, 0, 0, False)


async def test_quarantine_cooldown_doubles_up_to_its_cap(states: ProxyStateStore) -> None:
    first = await states.penalize("px-a", NOW, error=False, quarantine=True, cooldown=COOLDOWN)
    assert (first.strikes, first.quarantined_until) == (1, NOW + 10)
    assert first.quarantined(NOW + 9.9)
    assert not first.quarantined(NOW + 10)
    second = await states.penalize("px-a", NOW + 20, error=True, quarantine=True, cooldown=COOLDOWN)
    assert (second.strikes, second.quarantined_until, second.errors) == (2, NOW + 40, 1)
    third = await states.penalize("px-a", NOW + 50, error=False, quarantine=True, cooldown=COOLDOWN)
    assert (third.strikes, third.quarantined_until) == (3, NOW + 85)  # 40 s capped at 35
    assert (await states.load(["px-a"]))["px-a"] == third


async def test_bans_while_quarantined_do_not_lengthen_it(states: ProxyStateStore) -> None:
    first = await states.penalize("px-a", NOW, error=False, quarantine=True, cooldown=COOLDOWN)
    again = await states.penalize("px-a", NOW + 1, error=False, quarantine=True, cooldown=COOLDOWN)
    assert (again.strikes, again.quarantined_until, again.bans) == (1, first.quarantined_until, 2)


async def test_concurrent_changes_are_not_lost(states: ProxyStateStore) -> None:
    await asyncio.gather(*(states.success("px-a", NOW, 0.1) for _ in range(20)))
    await asyncio.gather(
        *(states.penalize("px-a", NOW, error=False, quarantine=False, cooldown=COOLDOWN)
          for _ in range(10))
    )  # fmt: skip
    state = (await states.load(["px-a"]))["px-a"]
    assert (state.successes, state.bans) == (20, 10)


async def test_register_sets_tier_and_label_and_keeps_health(states: ProxyStateStore) -> None:
    assert await states.all() == []
    await states.success("px-b", NOW, 0.5)
    await states.register("px-b", 1, "127.0.0.1:8902")
    await states.register("px-a", 0, "direct")
    found = await states.all()
    assert [(s.id, s.tier, s.label, s.successes) for s in found] == [
        ("px-a", 0, "direct", 0),
        ("px-b", 1, "127.0.0.1:8902", 1),
    ]
    again = await states.penalize("px-b", NOW, error=False, quarantine=True, cooldown=COOLDOWN)
    assert (again.tier, again.label) == (1, "127.0.0.1:8902")
