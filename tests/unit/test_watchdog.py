"""The claim loop's watchdog (``runtime/loop/watchdog.py``): one timer for every step in flight."""

from __future__ import annotations

import asyncio

from crawlfleet.runtime.loop.watchdog import StepWatchdog


async def _step(watchdog: StepWatchdog, work_s: float, ended: list[str], name: str) -> bool:
    """Run ``work_s`` of work under the watchdog; True if the watchdog stopped it."""
    timeout = asyncio.Timeout(None)
    try:
        try:
            async with timeout:
                watchdog.watch(timeout)
                await asyncio.sleep(work_s)
        finally:
            watchdog.release(timeout)
    except TimeoutError:
        assert timeout.expired()
        ended.append(name)
        return True
    ended.append(name)
    return False


async def test_each_step_is_stopped_at_its_own_deadline_and_no_other() -> None:
    watchdog = StepWatchdog(0.2)
    ended: list[str] = []
    stuck_first = asyncio.create_task(_step(watchdog, 60, ended, "stuck first"))
    await asyncio.sleep(0.1)
    quick = asyncio.create_task(_step(watchdog, 0.05, ended, "quick"))
    stuck_later = asyncio.create_task(_step(watchdog, 60, ended, "stuck later"))
    results = await asyncio.wait_for(asyncio.gather(stuck_first, quick, stuck_later), 5)
    assert results == [True, False, True]
    assert ended == ["quick", "stuck first", "stuck later"]
    watchdog.close()


async def test_a_timeout_of_the_step_s_own_is_not_the_watchdog_s() -> None:
    watchdog = StepWatchdog(10)
    timeout = asyncio.Timeout(None)
    try:
        async with timeout:
            watchdog.watch(timeout)
            await asyncio.wait_for(asyncio.sleep(60), 0.05)
    except TimeoutError:
        assert not timeout.expired()
    finally:
        watchdog.release(timeout)
        watchdog.close()


async def test_steps_that_end_in_time_leave_nothing_to_stop() -> None:
    watchdog = StepWatchdog(0.1)
    ended: list[str] = []
    assert not any(await asyncio.gather(*(_step(watchdog, 0.01, ended, "s") for _ in range(50))))
    await asyncio.sleep(0.15)  # the timer fires on no step
    assert await _step(watchdog, 60, ended, "stuck")
