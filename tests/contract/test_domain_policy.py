"""The ``QueueStore`` contract for lanes per fetcher kind and the per-domain policy record."""

from __future__ import annotations

from dataclasses import replace

from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.store_types import (
    BlockRules,
    Budget,
    DelaySource,
    DomainPolicy,
    PolicyChange,
    Signal,
)
from crawlfleet.models import Lease
from tests.contract.test_queue_store import (
    FREE,
    KINDS,
    NO_BUDGET,
    POLITE,
    T0,
    bury,
    claim,
    complete,
    names,
    req,
    retry,
)

BOTH = ("http", "browser")
RULES = BlockRules(
    window=4, min_samples=3, threshold=0.5, recover_after=2, max_level=2, cooldown_s=10.0
)
TOUCHY = DomainPolicy(delay_s=1.0, max_in_flight=1, blocks=RULES)


# --- lanes ---------------------------------------------------------------------------------


async def test_a_claim_gets_only_the_kinds_it_names(store: QueueStore) -> None:
    await store.add(
        [req("h1"), req("b1", fetcher="browser"), req("b2", "b.test", fetcher="browser")],
        NO_BUDGET,
    )
    await store.add([req("h2", "b.test"), req("f1", fetcher="file")], NO_BUDGET)
    assert sorted(names(await claim(store, kinds=("http",)))) == ["h1", "h2"]
    assert await claim(store, kinds=("http",)) == []
    assert await claim(store, kinds=("ftp",)) == []
    assert sorted(names(await claim(store, kinds=BOTH))) == ["b1", "b2"]
    assert names(await claim(store, kinds=("file", "http"))) == ["f1"]


async def test_lanes_of_a_domain_share_its_politeness(store: QueueStore) -> None:
    await store.add([req("h1"), req("h2"), req("b1", fetcher="browser")], NO_BUDGET)
    (http,) = await claim(store, policy=POLITE, kinds=("http",))
    assert await claim(store, policy=POLITE, kinds=("browser",)) == []  # one in flight, shared
    assert await complete(store, http, policy=POLITE)
    assert await claim(store, now=T0 + 0.5, policy=POLITE, kinds=("browser",)) == []
    assert await store.next_ready_at(T0 + 0.5, ("browser",)) == T0 + 1
    assert len(await claim(store, now=T0 + 1, policy=POLITE, kinds=BOTH)) == 1
    assert await claim(store, now=T0 + 5, policy=POLITE, kinds=BOTH) == []


async def test_next_ready_at_looks_only_at_the_kinds_asked(store: QueueStore) -> None:
    await store.add([req("b1", fetcher="browser"), req("b2", fetcher="browser")], NO_BUDGET)
    assert await store.next_ready_at(T0, ("http",)) is None
    assert await store.next_ready_at(T0, ("browser",)) == T0
    await store.add([req("h1", "b.test")], NO_BUDGET)
    (lease,) = await claim(store, policy=DomainPolicy(3.0, 5), kinds=("http",))
    assert await store.next_ready_at(T0, ("http",)) is None
    assert await store.next_ready_at(T0, BOTH) == T0
    assert await complete(store, lease)
    assert len(await claim(store, policy=DomainPolicy(3.0, 5), kinds=("browser",))) == 1
    assert await store.next_ready_at(T0, ("browser",)) == T0 + 3
    assert (await store.counts()).queued == 1


async def test_a_freed_domain_whose_lane_holds_only_a_retry_waits_for_it(
    store: QueueStore,
) -> None:
    policy = DomainPolicy(delay_s=1.0, max_in_flight=2)
    await store.add([req("1"), req("2")], NO_BUDGET)
    (first,) = await claim(store, limit=1, policy=policy)
    (second,) = await claim(store, now=T0 + 1, policy=policy)
    assert await retry(store, first, T0 + 10, "e", T0 + 1, policy)
    await store.add([req("3")], NO_BUDGET)
    assert len(await claim(store, now=T0 + 2, policy=policy)) == 1  # the domain is full again
    assert await store.next_ready_at(T0 + 2, KINDS) is None
    assert await complete(store, second, T0 + 2, policy)  # a lease end frees it
    assert await store.next_ready_at(T0 + 2, KINDS) == T0 + 10
    await store.add([req("4")], NO_BUDGET)
    assert len(await claim(store, now=T0 + 3, policy=policy)) == 1  # full again
    await store.set_concurrency("a.test", 2)  # a policy change frees it
    assert await store.next_ready_at(T0 + 3, KINDS) == T0 + 10
    assert await claim(store, now=T0 + 9, policy=policy) == []
    assert await claim(store, now=T0 + 10, policy=policy) == []  # full: 3 and 4 are out
    await store.set_concurrency("a.test", 3)
    assert names(await claim(store, now=T0 + 10, policy=policy)) == ["1"]


# --- delay, concurrency and strategy -------------------------------------------------------


async def test_an_unknown_domain_has_the_default_policy(store: QueueStore) -> None:
    view = await store.domain("new.test", POLITE)
    assert (view.base_delay_s, view.delay_source, view.max_in_flight) == (
        1.0,
        DelaySource.DEFAULT,
        1,
    )
    assert (view.level, view.effective_delay_s, view.queued, view.in_flight) == (0, 1.0, 0, 0)
    assert view.strategy == {}
    assert view.stats.counters == {}


async def test_a_domain_on_the_crawl_delay_shows_the_layer_that_gave_it(
    store: QueueStore,
) -> None:
    from_cli = replace(POLITE, delay_source=DelaySource.CLI)
    assert (await store.domain("new.test", from_cli)).delay_source is DelaySource.CLI
    await store.set_delay("a.test", 2.0, DelaySource.ROBOTS)
    await store.set_delay("a.test", 1.0, DelaySource.CONFIG)  # robots.txt dropped its delay
    assert (await store.domain("a.test", from_cli)).delay_source is DelaySource.CLI
    from_env = replace(POLITE, delay_source=DelaySource.ENV)
    assert [view.delay_source for view in await store.domains(from_env)] == [DelaySource.ENV]


async def test_a_domain_back_on_the_crawl_delay_follows_the_run_that_reads_it(
    store: QueueStore,
) -> None:
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await store.set_delay("a.test", 5.0, DelaySource.ROBOTS)
    await store.set_delay("a.test", 1.0, DelaySource.CONFIG)  # robots.txt dropped its delay
    resumed = replace(POLITE, delay_s=0.0)  # a later run with --delay 0
    view = await store.domain("a.test", resumed)
    assert (view.base_delay_s, view.effective_delay_s) == (0.0, 0.0)
    (first,) = await claim(store, policy=resumed)
    assert await complete(store, first, policy=resumed)
    assert len(await claim(store, now=T0, policy=resumed)) == 1  # no 1 s kept from before


async def test_robots_never_replaces_an_override(store: QueueStore) -> None:
    await store.set_delay("a.test", 2.0, DelaySource.ROBOTS)
    view = await store.domain("a.test", FREE)
    assert (view.base_delay_s, view.delay_source) == (2.0, DelaySource.ROBOTS)
    await store.set_delay("a.test", 5.0, DelaySource.OVERRIDE)
    await store.set_delay("a.test", 10.0, DelaySource.ROBOTS)
    view = await store.domain("a.test", FREE)
    assert (view.base_delay_s, view.delay_source) == (5.0, DelaySource.OVERRIDE)
    await store.set_delay("a.test", 0.5, DelaySource.OVERRIDE)
    assert (await store.domain("a.test", FREE)).base_delay_s == 0.5


async def test_a_capped_robots_delay_shows_its_source_and_never_replaces_an_override(
    store: QueueStore,
) -> None:
    await store.set_delay("a.test", 600.0, DelaySource.ROBOTS_CAPPED)
    view = await store.domain("a.test", FREE)
    assert (view.base_delay_s, view.delay_source) == (600.0, DelaySource.ROBOTS_CAPPED)
    await store.set_delay("a.test", 5.0, DelaySource.OVERRIDE)
    await store.set_delay("a.test", 600.0, DelaySource.ROBOTS_CAPPED)
    view = await store.domain("a.test", FREE)
    assert (view.base_delay_s, view.delay_source) == (5.0, DelaySource.OVERRIDE)


async def test_a_robots_delay_spaces_the_claims(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    await store.set_delay("a.test", 10.0, DelaySource.ROBOTS)
    assert len(await claim(store, policy=FREE)) == 1
    assert await claim(store, now=T0 + 9.9, policy=FREE) == []
    assert len(await claim(store, now=T0 + 10, policy=FREE)) == 1


async def test_strategy_slot_is_replaced_whole(store: QueueStore) -> None:
    await store.set_strategy("a.test", {"fetcher": "browser", "proxy": "residential"})
    await store.set_strategy("a.test", {"fetcher": "http"})
    assert (await store.domain("a.test", FREE)).strategy == {"fetcher": "http"}


async def test_domains_lists_the_busiest_first(store: QueueStore) -> None:
    await store.add([req(str(i), "b.test") for i in range(3)], NO_BUDGET)
    await store.add([req("1", "a.test"), req("1", "c.test"), req("2", "c.test")], NO_BUDGET)
    await store.set_concurrency("c.test", 7)
    views = await store.domains(FREE)
    assert [v.domain for v in views] == ["b.test", "c.test", "a.test"]
    assert [v.queued for v in views] == [3, 2, 1]
    assert views[1].max_in_flight == 7
    assert [v.domain for v in await store.domains(FREE, limit=1)] == ["b.test"]


async def test_domains_lists_domains_with_a_policy_or_statistics(store: QueueStore) -> None:
    await store.add([req("1", "b.test")], NO_BUDGET)
    await store.add([req("1", "d.test")], Budget(max_per_domain=0))
    await store.add([req("1", "e.test")], Budget(max_total=1))
    await store.add_counters("c.test", {"items.invalid.page": 1})
    await store.add_counters("f.test", {})
    await store.set_strategy("a.test", {"fetcher": "http"})
    views = await store.domains(FREE)
    # d.test and e.test: their refused request is counted (dropped.max_pages*, decision 0043)
    assert {(v.domain, v.queued) for v in views} == {
        ("b.test", 1), ("a.test", 0), ("c.test", 0), ("d.test", 0), ("e.test", 0)
    }  # fmt: skip
    assert [v.domain for v in views][:3] == ["b.test", "a.test", "c.test"]
    by_domain = {v.domain: v for v in views}
    assert by_domain["c.test"].stats.items("invalid") == {"page": 1}
    assert by_domain["d.test"].stats.get("dropped.max_pages_per_domain") == 1
    assert by_domain["e.test"].stats.get("dropped.max_pages") == 1


# --- block window --------------------------------------------------------------------------


async def test_one_block_among_successes_neither_escalates_nor_delays(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(8)], NO_BUDGET)
    policy = DomainPolicy(delay_s=1.0, max_in_flight=1)
    now = T0
    for _ in range(4):
        (lease,) = await claim(store, now=now, policy=policy)
        ended = await complete(store, lease, at=now, policy=policy, signal=Signal.SUCCESS)
        assert ended.change is None
        now += 1
    (blocked,) = await claim(store, now=now, policy=policy)
    ended = await bury(store, blocked, "HTTP 403", now, policy, Signal.BLOCK, reason="403")
    assert ended.change is None
    (blocked_retry,) = await claim(store, now=now + 1, policy=policy)
    ended = await retry(
        store, blocked_retry, now + 100, "HTTP 403", now + 1, policy, Signal.BLOCK, reason="403"
    )
    assert ended.change is None
    view = await store.domain("a.test", policy)
    assert (view.level, view.effective_delay_s, view.ready_at) == (0, 1.0, now + 2)
    assert len(await claim(store, now=now + 2, policy=policy)) == 1


async def test_blocks_over_the_threshold_escalate_then_recover(store: QueueStore) -> None:
    await store.add([req(str(i)) for i in range(8)], NO_BUDGET)
    (lease,) = await claim(store, now=T0, policy=TOUCHY)
    assert (await complete(store, lease, T0, TOUCHY, Signal.SUCCESS)).change is None
    (lease,) = await claim(store, now=T0 + 1, policy=TOUCHY)
    ended = await retry(store, lease, 0.0, "e", T0 + 1, TOUCHY, Signal.BLOCK, reason="HTTP 403")
    assert ended.change is None  # 1 of 2: fewer than min_samples
    (lease,) = await claim(store, now=T0 + 2, policy=TOUCHY)
    ended = await retry(store, lease, 0.0, "e", T0 + 2, TOUCHY, Signal.BLOCK, reason="HTTP 429")
    reason = "2 of 3 recent responses blocked; last: HTTP 429"
    assert ended.change == PolicyChange("a.test", 1, "escalated", reason, T0 + 12)

    view = await store.domain("a.test", TOUCHY)
    assert (view.level, view.effective_delay_s) == (1, 2.0)
    assert (view.cooldown_until, view.block_reason, view.ready_at) == (T0 + 12, "HTTP 429", T0 + 12)
    assert await claim(store, now=T0 + 11.9, policy=TOUCHY) == []
    assert await store.next_ready_at(T0 + 3, KINDS) == T0 + 12

    (lease,) = await claim(store, now=T0 + 12, policy=TOUCHY)
    assert (await complete(store, lease, T0 + 12, TOUCHY, Signal.SUCCESS)).change is None
    assert await claim(store, now=T0 + 13.9, policy=TOUCHY) == []  # base 1 s doubled
    (lease,) = await claim(store, now=T0 + 14, policy=TOUCHY)
    ended = await complete(store, lease, T0 + 14, TOUCHY, Signal.SUCCESS)
    recovered = "2 clean responses in a row"
    assert ended.change == PolicyChange("a.test", 0, "recovered", recovered, 0.0)
    view = await store.domain("a.test", TOUCHY)
    # The claim at T0 + 14 (still level 1) already set ready_at to T0 + 16; rests never shorten.
    assert (view.level, view.effective_delay_s, view.ready_at) == (0, 1.0, T0 + 16)


async def test_escalation_stops_at_the_max_level(store: QueueStore) -> None:
    eager = DomainPolicy(
        delay_s=0.0,
        max_in_flight=10,
        blocks=BlockRules(window=3, min_samples=1, threshold=1.0, max_level=2, cooldown_s=5.0),
    )
    await store.add([req(str(i)) for i in range(3)], NO_BUDGET)
    one, two, three = await claim(store, limit=3, policy=eager)
    first = await bury(store, one, "HTTP 403", T0, eager, Signal.BLOCK, reason="HTTP 403")
    reason = "1 of 1 recent responses blocked; last: HTTP 403"
    assert first.change == PolicyChange("a.test", 1, "escalated", reason, T0 + 5)
    second = await retry(store, two, 0.0, "e", T0 + 1, eager, Signal.BLOCK, reason="HTTP 403")
    assert second.change is not None
    assert (second.change.level, second.change.until) == (2, T0 + 11)
    third = await complete(store, three, T0 + 2, eager, Signal.BLOCK)
    assert third.change is None
    view = await store.domain("a.test", eager)
    assert (view.level, view.cooldown_until, view.ready_at) == (2, T0 + 11, T0 + 11)


# --- refused URLs (decision 0044) ----------------------------------------------------------

WARY = DomainPolicy(
    delay_s=0.0,
    max_in_flight=20,
    blocks=BlockRules(
        window=5, min_samples=3, threshold=0.5, max_level=3, cooldown_s=10.0,
        refusal_threshold=0.8, refusal_kinds=3,
    ),
)  # fmt: skip


async def refuse(store: QueueStore, lease: Lease, at: float) -> PolicyChange | None:
    ended = await retry(store, lease, 0.0, "e", at, WARY, Signal.REFUSED, reason="HTTP 403")
    assert ended
    return ended.change


async def test_refusals_of_one_kind_escalate_only_when_a_full_window_has_no_success(
    store: QueueStore,
) -> None:
    await store.add([req("ok1"), req("ok2"), *(req(f"x/{n}") for n in range(5))], NO_BUDGET)
    ok1, ok2, *refused = await claim(store, limit=7, policy=WARY)
    for at, lease in enumerate((ok1, ok2), start=1):
        assert (await complete(store, lease, T0 + at, WARY, Signal.SUCCESS)).change is None
    # "ooXXX" (3 of 5), then "oXXXX" (4 of 5 but one kind of URL): the URLs only
    assert [await refuse(store, lease, T0 + 3 + i) for i, lease in enumerate(refused[:4])] == [
        None
    ] * 4
    view = await store.domain("a.test", WARY)
    assert (view.level, view.ready_at) == (0, T0 + 6)
    reason = "5 of 5 recent responses refused or blocked (1 kind of URL); last: HTTP 403"
    assert await refuse(store, refused[4], T0 + 7) == PolicyChange(
        "a.test", 1, "escalated", reason, T0 + 17
    )
    view = await store.domain("a.test", WARY)
    assert (view.level, view.cooldown_until, view.block_reason) == (1, T0 + 17, "HTTP 403")


async def test_refusals_across_kinds_escalate_at_the_refusal_threshold(store: QueueStore) -> None:
    kinds = ("a", "b", "c", "d")  # four marks in the window (policy.KIND_MARKS)
    await store.add([req("ok"), *(req(f"{k}/1") for k in kinds)], NO_BUDGET)
    ok, *refused = await claim(store, limit=5, policy=WARY)
    assert (await complete(store, ok, T0, WARY, Signal.SUCCESS)).change is None
    changes = [await refuse(store, lease, T0 + 1 + i) for i, lease in enumerate(refused)]
    reason = "4 of 5 recent responses refused or blocked (4 kinds of URL); last: HTTP 403"
    assert changes == [None, None, None, PolicyChange("a.test", 1, "escalated", reason, T0 + 14)]


async def refuse_retries(store: QueueStore, name: str, at: float) -> list[PolicyChange | None]:
    """Refuse ``name`` on its first attempt and 5 retries, 10 s apart, then bury it; each
    lease end's change."""
    await store.add([req(name)], NO_BUDGET)
    changes = []
    for attempt in range(6):
        (lease,) = await claim(store, limit=1, now=at + 10 * attempt, policy=WARY)
        assert (lease.request.url.rsplit("/", 2)[-2:], lease.request.attempt) == (
            name.split("/"),
            attempt,
        )
        if attempt < 5:
            changes.append(await refuse(store, lease, at + 10 * attempt))
        else:  # out of retries
            dead = await bury(store, lease, "e", at + 50, WARY, Signal.REFUSED, reason="HTTP 403")
            changes.append(dead.change)
    return changes


async def test_a_refused_url_counts_once_while_others_succeed(store: QueueStore) -> None:
    await store.add([req("ok")], NO_BUDGET)
    (ok,) = await claim(store, policy=WARY)
    assert (await complete(store, ok, T0, WARY, Signal.SUCCESS)).change is None
    assert await refuse_retries(store, "x/0", T0 + 1) == [None] * 6  # "oX": its retries add none
    await store.add([req(f"y/{n}") for n in range(4)], NO_BUDGET)
    others = await claim(store, limit=4, now=T0 + 60, policy=WARY)
    changes = [await refuse(store, lease, T0 + 60) for lease in others]
    # only now is the window full: "oX" then y/0..y/3 pushed the success out
    assert [c.level if c else None for c in changes] == [None, None, None, 1]


async def test_a_host_refusing_its_one_url_escalates_on_its_retries(store: QueueStore) -> None:
    changes = await refuse_retries(store, "x/0", T0)
    reason = "5 of 5 recent responses refused or blocked (1 kind of URL); last: HTTP 403"
    assert changes[:4] == [None] * 4  # no success in the window: every refusal counts
    assert changes[4] == PolicyChange("a.test", 1, "escalated", reason, T0 + 50)
    assert changes[5] is None  # a new, empty window


async def test_a_block_rule_reached_by_a_refusal_names_the_blocks(store: QueueStore) -> None:
    await store.add([req("1"), req("2"), req("x/3")], NO_BUDGET)
    one, two, three = await claim(store, limit=3, policy=WARY)
    for at, lease in enumerate((one, two)):
        ended = await retry(store, lease, 0.0, "e", T0 + at, WARY, Signal.BLOCK, reason="HTTP 429")
        assert ended.change is None  # fewer than min_samples
    reason = "2 of 3 recent responses blocked; last: HTTP 403"
    assert await refuse(store, three, T0 + 2) == PolicyChange(
        "a.test", 1, "escalated", reason, T0 + 12
    )


async def test_a_stale_lease_end_changes_no_policy(store: QueueStore) -> None:
    await store.add([req("1"), req("2")], NO_BUDGET)
    eager = DomainPolicy(0.0, 10, BlockRules(min_samples=1, threshold=0.1))
    (lease,) = await claim(store, limit=1, policy=eager)
    assert await complete(store, lease, policy=eager)
    ended = await retry(
        store, lease, 0.0, "e", T0, eager, Signal.BLOCK, block_until=T0 + 50, reason="late"
    )
    assert not ended
    assert ended.change is None
    view = await store.domain("a.test", eager)
    assert (view.level, view.ready_at, view.retry_after_until, view.block_reason) == (0, T0, 0, "")
    assert len(await claim(store, now=T0, policy=eager)) == 1
