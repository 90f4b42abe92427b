"""The one claim loop: keep up to ``concurrency`` crawl steps in flight, claiming due work.

Both runners drive their ``Crawler`` with it: the embedded runner until the frontier is
empty, a Celery worker for one batch (``max_leases``, ``deadline_s``, ``idle_s``). It claims
as many leases as it has free slots, only of the fetcher kinds it serves, and sleeps until a
step ends, the next domain is due (``Frontier.next_ready_at``) or ``MAX_WAIT_S`` passed.
When it stops claiming it lets the steps in flight finish. Delays live in the frontier: the
loop never waits longer than that to look again, so work added by another process is seen.

While steps run, their leases are renewed together every ``lease_s / 3`` (``leases.py``),
also while the loop drains; a step that runs longer than ``max_step_s`` (the watchdog, on the
event loop's own clock, one timer for all steps: ``watchdog.py``) is cancelled and its lease failed with an error saying so, so its
request is retried or dead-lettered rather than held, or left to expire unexplained.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crawlfleet.clock import Clock
from crawlfleet.errors import ConfigError, StateError
from crawlfleet.models import Lease
from crawlfleet.runtime.loop.drain import MAX_WAIT_S, MIN_WAIT_S, TICK_S, drain
from crawlfleet.runtime.loop.lanes import lanes_for
from crawlfleet.runtime.loop.leases import LeaseRenewer
from crawlfleet.runtime.loop.watchdog import StepWatchdog
from crawlfleet.runtime.step.crawler import Crawler

log = logging.getLogger("crawlfleet.runtime.loop")  # its name before #36 (decision 0062)


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How a run of the loop ended and what it did.

    ``reason``: ``empty`` (nothing pending), ``stranded`` (with ``until_empty``: what is
    pending is no kind this loop serves), ``idle`` (nothing to run for ``idle_s``),
    ``stopped``, ``deadline``, ``max_leases``, or ``error`` (a step raised and
    ``stop_on_error`` was set; ``run`` re-raised it). ``processed`` counts the steps that
    recorded an outcome, those the watchdog stopped included.
    """

    reason: str
    claimed: int
    processed: int
    errors: int


class ClaimLoop:
    """Claims due leases of ``kinds`` and runs ``crawler.process`` on each, concurrently.

    ``concurrency`` bounds the steps in flight of the kinds not in ``kind_limits``; each kind
    in ``kind_limits`` has its own bound (``lanes.py``); all of them together start no
    more steps than the crawler's ``body_bytes`` has room for (``step/body_bytes.py``).
    """

    def __init__(
        self,
        crawler: Crawler,
        *,
        kinds: frozenset[str],
        concurrency: int,
        clock: Clock,
        kind_limits: Mapping[str, int] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if not kinds:
            raise ConfigError("a claim loop must serve at least one fetcher kind")
        missing = sorted(kinds - crawler.kinds)
        if missing:
            raise ConfigError(
                f"no fetcher for kind {', '.join(map(repr, missing))} in this process "
                f"(it has {sorted(crawler.kinds)})"
            )
        self._lanes = lanes_for(kinds, concurrency, kind_limits)
        self._crawler = crawler
        self._frontier = crawler.parts.frontier
        self._max_step_s = crawler.parts.max_step_s
        self._watchdog = StepWatchdog(self._max_step_s)
        self._body_bytes = crawler.parts.body_bytes
        self._kinds = kinds
        self._clock = clock
        self._processed = 0
        self._errors = 0
        self._running = 0
        self._failure: BaseException | None = None

    @property
    def in_flight(self) -> int:
        """Steps running now (a worker's heartbeat reports it)."""
        return self._running

    @property
    def processed(self) -> int:
        """Steps of the current run that recorded an outcome so far."""
        return self._processed

    async def run(
        self,
        *,
        stop: asyncio.Event,
        max_leases: int | None = None,
        deadline_s: float | None = None,
        idle_s: float | None = None,
        until_empty: bool = False,
        stop_on_error: bool = False,
        grace_s: float | None = None,
        on_tick: Callable[[], Awaitable[None]] | None = None,
        hold: Callable[[], Awaitable[bool]] | None = None,
    ) -> LoopResult:
        """Run until told to stop; see ``LoopResult.reason`` for the ways it ends.

        ``until_empty``: return once no step runs and ``counts().pending`` is 0, or nothing
        of ``kinds`` is queued (the embedded runner: no other process holds leases). ``idle_s``: return once nothing
        ran or could be claimed for that long. ``stop_on_error``: a step that raises stops
        the claiming and ``run`` re-raises it once the others finished; otherwise it is
        logged and counted, and its lease left to expire. ``grace_s``: after ``stop`` is
        set, steps still running that long are cancelled (their leases stay, and expire);
        None waits for them all, as every other way of ending does. ``hold``: asked on
        every tick; while it answers True nothing is claimed (steps in flight go on) — a
        paused crawl (``runtime/control.py``).
        """
        self._processed = self._errors = self._running = 0
        self._failure = None
        clock = self._clock
        started = clock.now()
        deadline = started + deadline_s if deadline_s is not None else None
        tasks: set[asyncio.Task[None]] = set()
        renewer = LeaseRenewer(self._frontier, clock)
        stop_wait: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        claimed = 0
        idle_since: float | None = None
        last_tick: float | None = None
        held = False
        reason = ""
        try:
            while True:
                now = clock.now()
                if last_tick is None or now - last_tick >= TICK_S:
                    last_tick = now
                    if on_tick is not None:
                        await on_tick()
                    held = hold is not None and await hold()
                reason = self._reason_to_stop(stop, now, deadline, claimed, max_leases)
                if reason:
                    break
                room = self._body_bytes.room()  # steps claimed earlier have all started
                for lane in self._lanes:
                    free = min(lane.free, room)
                    if max_leases is not None:
                        free = min(free, max_leases - claimed)
                    if free <= 0 or held:
                        continue
                    for lease in await self._frontier.claim(free, now, lane.kinds):
                        claimed += 1
                        room -= 1
                        renewer.hold(lease)
                        self._running += 1
                        task = asyncio.create_task(self._step(lease, renewer, stop_on_error))
                        tasks.add(task)
                        lane.running.add(task)
                        task.add_done_callback(lane.running.discard)
                await renewer.renew_due(clock.now())
                if tasks:
                    idle_since = None
                else:
                    if until_empty:
                        reason = await self._empty_reason(now)
                        if reason:
                            break
                    if idle_s is not None:
                        idle_since = now if idle_since is None else idle_since
                        if now - idle_since >= idle_s:
                            reason = "idle"
                            break
                full = held or room <= 0 or all(lane.free <= 0 for lane in self._lanes)
                wait_s = await self._wait_s(now, full=full)
                if idle_s is not None and idle_since is not None:
                    wait_s = min(wait_s, max(MIN_WAIT_S, idle_since + idle_s - now))
                if deadline is not None:
                    wait_s = min(wait_s, max(MIN_WAIT_S, deadline - now))
                renew_s = renewer.wait_s(now)
                if renew_s is not None:
                    wait_s = min(wait_s, max(MIN_WAIT_S, renew_s))
                await self._wait(tasks, stop_wait, wait_s)
        finally:
            stop_wait.cancel()
            grace = grace_s if stop.is_set() else None
            await drain(tasks, grace, renewer, clock, on_tick)
            self._watchdog.close()
        if self._failure is not None:
            raise self._failure
        return LoopResult(reason, claimed, self._processed, self._errors)

    def _reason_to_stop(
        self,
        stop: asyncio.Event,
        now: float,
        deadline: float | None,
        claimed: int,
        max_leases: int | None,
    ) -> str:
        if self._failure is not None:
            return "error"
        if stop.is_set():
            return "stopped"
        if deadline is not None and now >= deadline:
            return "deadline"
        if max_leases is not None and claimed >= max_leases:
            return "max_leases"
        return ""

    async def _empty_reason(self, now: float) -> str:
        """``empty``, ``stranded`` (only other kinds' work is left) or "" (keep going)."""
        if (await self._frontier.counts()).pending == 0:
            return "empty"
        if await self._frontier.next_ready_at(now, self._kinds) is None:
            return "stranded"
        return ""

    async def _wait_s(self, now: float, *, full: bool) -> float:
        if full:
            return MAX_WAIT_S
        next_at = await self._frontier.next_ready_at(now, self._kinds)
        if next_at is None:
            return MAX_WAIT_S
        return min(MAX_WAIT_S, max(MIN_WAIT_S, next_at - now))

    async def _wait(
        self, tasks: set[asyncio.Task[None]], stop_wait: asyncio.Future[Any], wait_s: float
    ) -> None:
        """Until a step ends, ``stop`` is set or ``wait_s`` passed.

        With steps in flight the wait is on the event loop's time; with none it is a
        ``clock.sleep``, so a fake clock moves only while nothing runs (steps move it by
        their own sleeps), and a step's times are never skewed by the loop's waiting.
        """
        if tasks:
            done, _ = await asyncio.wait(
                (*tasks, stop_wait), timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
            )
            tasks.difference_update(done)
            return
        sleeper: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(wait_s))
        try:
            await asyncio.wait((stop_wait, sleeper), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()

    async def _step(self, lease: Lease, renewer: LeaseRenewer, stop_on_error: bool) -> None:
        """Run one step; a step that raises leaves its lease to expire (and be reaped)."""
        try:
            await self._bounded(lease)
        except (StateError, OSError) as exc:
            self._errors += 1
            log.warning("step for %s failed, lease left to expire: %s", lease.request.url, exc)
            if stop_on_error and self._failure is None:
                self._failure = exc
        except Exception as exc:
            self._errors += 1
            log.exception("step for %s raised %s", lease.request.url, type(exc).__name__)
            if stop_on_error and self._failure is None:
                self._failure = exc
        else:
            self._processed += 1
        finally:
            self._running -= 1
            renewer.release(lease)

    async def _bounded(self, lease: Lease) -> None:
        """Run the step under the watchdog: past ``max_step_s`` it is cancelled and failed."""
        started = self._clock.now()
        watchdog = asyncio.Timeout(None)  # given its deadline by the loop's StepWatchdog
        try:
            try:
                async with watchdog:
                    self._watchdog.watch(watchdog)
                    await self._crawler.process(lease)
            finally:
                self._watchdog.release(watchdog)
        except TimeoutError:
            if not watchdog.expired():
                raise
            error = f"step exceeded max_step_s ({self._max_step_s:g} s)"
            log.warning("%s: %s, cancelled", lease.request.url, error)
            await self._crawler.abandon(lease, started, error)
