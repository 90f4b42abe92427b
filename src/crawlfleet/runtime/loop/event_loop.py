"""The event loop of a crawl that crawlfleet starts itself: uvloop's (decision 0030).

``crawlfleet crawl`` and ``demo``, ``Crawl.run()`` and a distributed worker run their crawl
steps on a uvloop loop: its transports, timers and callbacks are C, where asyncio's are
Python, and the embedded crawl of the bench site costs ~4-6 % less CPU a page with it. A
program that runs ``Crawl.run_async`` in its own loop keeps the loop it chose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new uvloop event loop, not set as the thread's current one."""
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)`` on a uvloop loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)
