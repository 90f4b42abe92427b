"""The ``QueueStore`` contract for the strategy ladder: the lease end that moves a domain's block
level moves its strategy slot in the same step, keeping the keys the ladder does not own."""

from __future__ import annotations

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.store_types import BlockRules, DomainPolicy, Signal
from tests.contract.test_queue_store import NO_BUDGET, T0, StoreFor, claim, complete, req, retry

LADDER = ("slow", "session", "tier", "impersonate", "browser")
EAGER = DomainPolicy(
    delay_s=0.0,
    max_in_flight=100,
    blocks=BlockRules(
        window=3, min_samples=1, threshold=1.0, recover_after=1, max_level=6, cooldown_s=0.0,
        ladder=LADDER,
    ),
)  # fmt: skip


async def block(store: QueueStore, at: float) -> tuple[int, str, dict[str, str] | None]:
    (lease,) = await claim(store, limit=1, now=at)
    ended = await retry(store, lease, 0.0, "403", at, Signal.BLOCK, reason="HTTP 403")
    assert ended.change is not None
    change = ended.change
    return change.level, change.rung, dict(change.strategy or {})


async def clean(store: QueueStore, at: float) -> tuple[int, str, dict[str, str] | None]:
    (lease,) = await claim(store, limit=1, now=at)
    ended = await complete(store, lease, at, Signal.SUCCESS)
    assert ended.change is not None
    change = ended.change
    return change.level, change.rung, dict(change.strategy or {})


async def test_each_escalation_climbs_a_rung_with_the_level(store_for: StoreFor) -> None:
    store = await store_for(EAGER)
    await store.add([req(str(i)) for i in range(20)], NO_BUDGET)
    await store.set_strategy("a.test", {"header_profile": "chrome-1", "tier": "0"})
    kept = {"header_profile": "chrome-1"}
    steps = [await block(store, T0 + i) for i in range(6)]
    assert steps == [
        (1, "slow", {**kept, "tier": "0", "rung": "slow"}),
        (2, "session", {**kept, "tier": "0", "rung": "session", "session_epoch": "1"}),
        (3, "tier", {**kept, "tier": "1", "rung": "tier", "session_epoch": "1"}),
        (4, "impersonate",
         {**kept, "tier": "1", "rung": "impersonate", "session_epoch": "1",
          "fetcher": "impersonate"}),
        (5, "browser",
         {**kept, "tier": "1", "rung": "browser", "session_epoch": "1", "fetcher": "browser"}),
        (6, "slow",
         {**kept, "tier": "1", "rung": "slow", "session_epoch": "1", "fetcher": "browser"}),
    ]  # fmt: skip
    view = await store.domain("a.test")
    assert (view.level, dict(view.strategy)) == (6, steps[-1][2])


async def test_each_recovery_comes_down_a_rung(store_for: StoreFor) -> None:
    store = await store_for(EAGER)
    await store.add([req(str(i)) for i in range(20)], NO_BUDGET)
    await store.set_strategy("a.test", {"header_profile": "chrome-1"})
    for i in range(5):
        await block(store, T0 + i)
    steps = [await clean(store, T0 + 10 + i) for i in range(5)]
    profile = {"header_profile": "chrome-1", "session_epoch": "1"}
    assert steps == [
        (4, "impersonate", {**profile, "tier": "1", "rung": "impersonate", "fetcher": "impersonate"}),
        (3, "tier", {**profile, "tier": "1", "rung": "tier"}),
        (2, "session", {**profile, "tier": "0", "rung": "session"}),
        (1, "slow", {**profile, "tier": "0", "rung": "slow"}),
        (0, "", {**profile, "tier": "0"}),
    ]  # fmt: skip
    assert dict((await store.domain("a.test")).strategy) == steps[-1][2]


async def test_a_slot_changed_by_another_writer_is_read_not_overwritten(
    store_for: StoreFor,
) -> None:
    store = await store_for(EAGER)
    await store.add([req(str(i)) for i in range(5)], NO_BUDGET)
    await block(store, T0)
    await store.set_strategy("a.test", {"rung": "slow", "session_epoch": "7", "tier": "x"})
    level, rung, strategy = await block(store, T0 + 1)
    assert (level, rung) == (2, "session")
    assert strategy == {"rung": "session", "session_epoch": "8", "tier": "x"}


async def test_without_rungs_the_slot_is_untouched(store_for: StoreFor) -> None:
    plain = DomainPolicy(0.0, 100, BlockRules(window=3, min_samples=1, threshold=1.0))
    store = await store_for(plain)
    await store.add([req("1")], NO_BUDGET)
    await store.set_strategy("a.test", {"fetcher": "http"})
    (lease,) = await claim(store)
    ended = await retry(store, lease, 0.0, "403", T0, Signal.BLOCK, reason="HTTP 403")
    assert ended.change is not None
    assert (ended.change.level, ended.change.rung, ended.change.strategy) == (1, "", None)
    assert dict((await store.domain("a.test")).strategy) == {"fetcher": "http"}


async def test_a_window_of_refused_urls_climbs_the_ladder_as_blocks_do(store_for: StoreFor) -> None:
    """Decision 0044: refusals that add up to a ban move the level and the slot together."""
    store = await store_for(EAGER)
    await store.add([req(f"x/{n}") for n in range(6)], NO_BUDGET)
    leases = await claim(store, limit=6)
    changes = [
        (await retry(store, lease, 0.0, "403", T0 + i, Signal.REFUSED, reason="HTTP 403")).change
        for i, lease in enumerate(leases)
    ]
    moved = [(c.level, c.rung, dict(c.strategy or {})) for c in changes if c is not None]
    assert [i for i, c in enumerate(changes) if c is not None] == [2, 5]  # a full window each
    assert moved == [
        (1, "slow", {"rung": "slow"}),
        (2, "session", {"rung": "session", "session_epoch": "1"}),
    ]
    view = await store.domain("a.test")
    assert (view.level, view.block_reason) == (2, "HTTP 403")
