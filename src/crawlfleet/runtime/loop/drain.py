"""The claim loop's waits, and its end: letting the steps in flight finish.

When the loop stops claiming (``claim.py``), ``drain`` waits for the steps still running, at
most ``grace_s`` when the loop was told to stop with one; meanwhile it renews their leases,
as the loop does, and calls ``on_tick`` every ``TICK_S`` (a worker's heartbeat: a slow page
ending a batch must not make the worker look dead). Steps past the grace are cancelled;
their leases stay, and expire.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from crawlfleet.clock import Clock
from crawlfleet.runtime.loop.leases import LeaseRenewer

log = logging.getLogger("crawlfleet.runtime.loop_drain")  # its name before #36 (decision 0062)

MIN_WAIT_S = 0.005
MAX_WAIT_S = 0.5
TICK_S = 0.5
"""How often ``on_tick`` is called while the loop runs, and while it drains."""


async def drain(
    tasks: set[asyncio.Task[None]],
    grace_s: float | None,
    renewer: LeaseRenewer,
    clock: Clock,
    on_tick: Callable[[], Awaitable[None]] | None,
) -> None:
    """Wait for ``tasks`` (at most ``grace_s``), renewing their leases on ``clock`` and
    calling ``on_tick``; a tick that raises is logged, not retried. The grace and the ticks
    run on the event loop's time."""
    loop = asyncio.get_running_loop()
    until = None if grace_s is None else loop.time() + grace_s
    last_tick = loop.time()
    while tasks:
        if on_tick is not None and loop.time() - last_tick >= TICK_S:
            last_tick = loop.time()
            try:
                await on_tick()
            except Exception:
                log.exception("on_tick raised while the steps in flight finish")
                on_tick = None
        wait_s = renewer.wait_s(clock.now())
        wait_s = MAX_WAIT_S if wait_s is None else min(MAX_WAIT_S, max(MIN_WAIT_S, wait_s))
        if until is not None:
            wait_s = min(wait_s, until - loop.time())
            if wait_s <= 0:
                break
        done, _ = await asyncio.wait(tasks, timeout=wait_s)
        tasks.difference_update(done)
        await renewer.renew_due(clock.now())
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
