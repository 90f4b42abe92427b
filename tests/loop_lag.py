"""How long work kept the event loop from running: the measure of "does not stall the loop"."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

TICK_S = 0.005


async def max_loop_lag_s(work: Awaitable[object]) -> float:
    """The longest the event loop was kept from a 5 ms ticker while ``work`` ran."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        loop = asyncio.get_running_loop()
        while not done.is_set():
            before = loop.time()
            await asyncio.sleep(TICK_S)
            lags.append(loop.time() - before - TICK_S)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    try:
        await work
    finally:
        done.set()
        await task
    return max(lags)
