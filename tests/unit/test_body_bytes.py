"""BodyBytes: how many steps may start, given the bodies held and the typical body."""

from __future__ import annotations

import pytest

from crawlfleet.runtime.step.body_bytes import BodyBytes

MIB = 1024 * 1024


def test_with_nothing_in_flight_one_step_may_always_start() -> None:
    budget = BodyBytes(8 * MIB)
    for _ in range(50):  # the typical body grows to 100 MiB, far past the budget
        with budget.step() as body:
            body.fetched(100 * MIB)
    assert budget.room() == 1


def test_a_crawl_starts_with_an_eighth_of_the_budget_a_step() -> None:
    assert BodyBytes(64 * MIB).room() == 8


def test_bodies_held_leave_no_room_until_their_steps_end() -> None:
    budget = BodyBytes(8 * MIB)
    with budget.step() as first:
        first.fetched(8 * MIB)
        assert budget.room() == 0
        assert budget.held_bytes == 8 * MIB
    assert budget.held_bytes == 0
    assert budget.room() >= 1


def test_steps_still_fetching_count_at_the_typical_body() -> None:
    budget = BodyBytes(64 * MIB)
    for _ in range(100):
        with budget.step() as body:
            body.fetched(4 * MIB)
    assert budget.typical_bytes == pytest.approx(4 * MIB, rel=0.01)
    alone = budget.room()
    assert alone in (15, 16)  # 64 MiB of ~4 MiB bodies
    with budget.step(), budget.step(), budget.step():
        assert budget.room() == alone - 3  # each step fetching counts one typical body
        with budget.step() as fetched:
            fetched.fetched(16 * MIB)  # held, it counts its size; the typical body grows
            assert budget.room() == int((64 - 16 - 3 * 5.5) / 5.5)


def test_small_bodies_let_many_steps_start() -> None:
    budget = BodyBytes(64 * MIB)
    for _ in range(100):
        with budget.step() as body:
            body.fetched(20 * 1024)
    assert budget.room() > 1000


def test_a_failed_fetch_holds_nothing_after_its_step() -> None:
    budget = BodyBytes(8 * MIB)
    with pytest.raises(RuntimeError), budget.step():
        raise RuntimeError("connection refused")
    assert (budget.fetching, budget.held_bytes) == (0, 0)


def test_a_body_counts_once() -> None:
    budget = BodyBytes(8 * MIB)
    with budget.step() as body:
        body.fetched(MIB)
        body.fetched(MIB)
        assert budget.held_bytes == MIB
    assert budget.held_bytes == 0
