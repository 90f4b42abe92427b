"""The strategy ladder's pure rules over a policy record, with a fake clock: which rungs a
crawl keeps, the rung sequence as a domain escalates, and the way back down."""

from __future__ import annotations

from typing import get_args

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.frontier import ladder, policy
from crawlfleet.frontier.memory import MemoryQueueStore
from crawlfleet.frontier.policy import PolicyRecord
from crawlfleet.frontier.store_types import BlockRules, DomainPolicy, PolicyChange, Report, Signal
from crawlfleet.records import Attempt, Outcome
from crawlfleet.runtime.choice.strategy import Strategies, fetcher_kind
from crawlfleet.runtime.wiring import build_frontier
from crawlfleet.settings import Rung, Settings
from tests.fixtures.clock import FakeClock

FULL = ("slow", "session", "tier", "impersonate", "browser")


def test_the_settings_know_every_rung() -> None:
    assert get_args(Rung) == ladder.RUNGS == FULL


@pytest.mark.parametrize(
    ("wanted", "tiers", "kinds", "kept"),
    [
        (FULL, 0, ("http",), ("slow", "session")),
        (FULL, 1, ("http", "impersonate"), ("slow", "session", "impersonate")),
        (FULL, 2, ("http", "impersonate", "browser"), FULL),
        (("tier", "tier", "tier", "browser"), 3, ("browser",), ("tier", "tier", "browser")),
        ((), 3, ("browser",), ()),
    ],
)
def test_rungs_the_crawl_cannot_use_are_skipped(
    wanted: tuple[str, ...], tiers: int, kinds: tuple[str, ...], kept: tuple[str, ...]
) -> None:
    assert ladder.usable_rungs(wanted, proxy_tiers=tiers, kinds=kinds) == kept


def test_the_session_rung_needs_crawl_sessions() -> None:
    kept = ladder.usable_rungs(FULL, proxy_tiers=0, kinds=("http",), sessions=False)
    assert kept == ("slow",)


def test_an_unknown_rung_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="unknown rung 'warp' in ladder; choose from slow,"):
        ladder.check_ladder(("slow", "warp"))


class Domain:
    """One domain's record under the ladder, fed responses at fake-clock times."""

    def __init__(self, rungs: tuple[str, ...], recover_after: int = 3) -> None:
        self.clock = FakeClock(start=1000.0)
        rules = BlockRules(
            window=4, min_samples=2, threshold=0.5, recover_after=recover_after,
            max_level=len(rungs) + 1, cooldown_s=10.0, ladder=rungs,
        )  # fmt: skip
        self.default = DomainPolicy(delay_s=1.0, max_in_flight=1, blocks=rules)
        self.record = PolicyRecord()
        self.ready_at = 0.0

    def respond(self, signal: Signal, reason: str = "") -> PolicyChange | None:
        self.clock.advance(1.0)
        attempt = Attempt(
            url="https://a.test/", fingerprint="f", domain="a.test", worker="w",
            outcome=Outcome.RETRY if signal is Signal.BLOCK else Outcome.OK, status=None,
            bytes=0, latency_s=0.0, retry=0, at=self.clock.now(),
        )  # fmt: skip
        report = Report(attempt, signal, reason)
        self.ready_at, change = policy.end_lease(
            self.record, "a.test", self.ready_at, report, self.default
        )
        return change

    def climb(self) -> PolicyChange:
        """Blocks until the level goes up; the change."""
        for _ in range(10):
            change = self.respond(Signal.BLOCK, "HTTP 403")
            if change is not None:
                return change
        raise AssertionError("never escalated")


def test_each_escalation_climbs_one_rung_and_rests_longer() -> None:
    domain = Domain(("slow", "session", "tier", "impersonate", "browser"))
    domain.record.strategy = {"profile": "p1"}
    changes = [domain.climb() for _ in range(6)]
    assert [(c.level, c.rung) for c in changes] == [
        (1, "slow"), (2, "session"), (3, "tier"), (4, "impersonate"), (5, "browser"), (6, "slow")
    ]  # fmt: skip
    assert [c.strategy for c in changes][1:4] == [
        {"profile": "p1", "rung": "session", "session_epoch": "1"},
        {"profile": "p1", "rung": "tier", "session_epoch": "1", "tier": "1"},
        {"profile": "p1", "rung": "impersonate", "session_epoch": "1", "tier": "1",
         "fetcher": "impersonate"},
    ]  # fmt: skip
    assert changes[5].strategy == {
        "profile": "p1", "rung": "slow", "session_epoch": "1", "tier": "1", "fetcher": "browser"
    }  # fmt: skip
    # two blocks per rung (the window starts over), one a second: cooldown 10 s * 2 ** (level - 1)
    assert [c.until for c in changes] == [1012, 1024, 1046, 1088, 1170, 1332]
    assert domain.ready_at == changes[5].until
    assert changes[0].reason == "2 of 2 recent responses blocked; last: HTTP 403"


def test_the_max_level_stops_the_climb() -> None:
    domain = Domain(("impersonate",))
    domain.climb()
    domain.climb()
    assert domain.record.level == 2
    for _ in range(6):
        assert domain.respond(Signal.BLOCK, "HTTP 403") is None
    assert domain.record.strategy == {"rung": "slow", "fetcher": "impersonate"}


def test_sustained_success_comes_down_one_rung_per_recover_after() -> None:
    domain = Domain(("session", "impersonate", "browser"), recover_after=3)
    for _ in range(3):
        domain.climb()
    assert domain.record.strategy["fetcher"] == "browser"
    steps: list[tuple[int, str, str | None]] = []
    for _ in range(9):
        change = domain.respond(Signal.SUCCESS)
        if change is not None:
            assert change.change == "recovered"
            steps.append((change.level, change.rung, (change.strategy or {}).get("fetcher")))
    assert steps == [(2, "impersonate", "impersonate"), (1, "session", None), (0, "", None)]
    assert domain.record.strategy == {"session_epoch": "1"}


def test_a_block_between_successes_restarts_the_recovery() -> None:
    domain = Domain(("impersonate",), recover_after=3)
    domain.climb()
    assert domain.respond(Signal.SUCCESS) is None
    assert domain.respond(Signal.SUCCESS) is None
    assert domain.respond(Signal.BLOCK, "HTTP 403") is None  # 1 of 3: under the threshold
    assert domain.respond(Signal.SUCCESS) is None
    assert domain.respond(Signal.SUCCESS) is None
    change = domain.respond(Signal.SUCCESS)
    assert change is not None
    assert (change.level, change.strategy) == (0, {})


def test_an_http_request_takes_the_fetcher_its_domain_strategy_names() -> None:
    served = ("http", "impersonate", "file")
    impersonated = {"fetcher": "impersonate"}
    assert fetcher_kind("http", impersonated, served) == "impersonate"
    assert fetcher_kind("http", impersonated, ("http",)) == "http"
    assert fetcher_kind("file", impersonated, served) == "file"
    # browser, served here or not: a process without one moves the lease to the browser lane
    assert fetcher_kind("http", {"fetcher": "browser"}, served) == "browser"
    assert fetcher_kind("file", {"fetcher": "browser"}, served) == "file"
    assert fetcher_kind("http", {}, served) == "http"


async def test_strategies_are_read_at_most_once_per_ttl_and_learned_at_once() -> None:
    clock = FakeClock(start=50.0)
    store = MemoryQueueStore()
    strategies = Strategies(build_frontier(Settings(), store, []), clock, ttl_s=2.0)
    assert await strategies.of("a.test") == {}
    await store.set_strategy("a.test", {"fetcher": "impersonate"})
    clock.advance(1.9)
    assert await strategies.of("a.test") == {}  # cached
    clock.advance(0.1)
    assert await strategies.of("a.test") == {"fetcher": "impersonate"}
    strategies.learned(PolicyChange("a.test", 0, "recovered", "", 0.0, "", {}))
    assert await strategies.of("a.test") == {}
    strategies.learned(PolicyChange("a.test", 1, "escalated", "", 0.0))  # slot untouched
    assert await strategies.of("a.test") == {}
