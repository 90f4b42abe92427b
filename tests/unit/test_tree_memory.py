"""ParseBytes: large pages parse a few bytes at a time, in order; one page always may."""

from __future__ import annotations

import asyncio

import pytest

from crawlfleet.parsing.tree_memory import ParseBytes, return_free_heap


async def test_pages_past_the_limit_wait_their_turn_in_order() -> None:
    parse_bytes = ParseBytes(10)
    await parse_bytes.take(6)
    order: list[str] = []

    async def parse(name: str, size: int) -> None:
        await parse_bytes.take(size)
        order.append(name)

    second = asyncio.create_task(parse("second", 6))
    third = asyncio.create_task(parse("third", 1))  # it would fit, but waits behind second
    await asyncio.sleep(0)
    assert order == []
    parse_bytes.give_back(6)
    await asyncio.gather(second, third)
    assert order == ["second", "third"]
    assert parse_bytes.held_bytes == 7


async def test_a_page_larger_than_the_limit_parses_alone() -> None:
    parse_bytes = ParseBytes(10)
    await parse_bytes.take(50)
    waiting = asyncio.create_task(parse_bytes.take(1))
    await asyncio.sleep(0)
    assert not waiting.done()
    parse_bytes.give_back(50)
    await waiting
    assert parse_bytes.held_bytes == 1


async def test_a_cancelled_wait_holds_nothing() -> None:
    parse_bytes = ParseBytes(10)
    await parse_bytes.take(10)
    waiting = asyncio.create_task(parse_bytes.take(5))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    parse_bytes.give_back(10)
    assert parse_bytes.held_bytes == 0
    await parse_bytes.take(10)  # nothing left in the line


def test_giving_the_free_heap_back_is_harmless() -> None:
    return_free_heap()
    return_free_heap()
