"""Keeping the leases of running steps alive: one renewer per claim loop.

A step can outlast its lease for good reasons (its links' new hosts answer robots.txt slowly,
a sink is slow); a lease that expires meanwhile is reaped and its page handed to another
worker and fetched twice. The ``ClaimLoop`` holds the lease of each step it runs here and
renews all of them together every ``lease_s / 3``, from the wake-ups it already has: one
timer and one round of store calls per loop rather than a sleeping task per step, and
nothing to cancel when a step ends. A round renews its leases one after another (run all at
once, 64 renewals on top of 64 steps' own calls overflowed the Redis client's pool of 100
connections, "Too many connections", and leases expired under a live worker) and stops at
the first store error. A lease is thus renewed at most a third of its length after it was
claimed or last renewed, so one round can fail (a Redis hiccup) and the next still comes in
time. The loop's watchdog (``max_step_s``) stops renewal from keeping a stuck
step's lease forever.
"""

from __future__ import annotations

import logging

from crawlfleet.clock import Clock
from crawlfleet.errors import StateError
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.models import Lease

log = logging.getLogger("crawlfleet.runtime.leases")  # its name before #36 (decision 0062)

RENEWALS_PER_LEASE = 3
"""How often a lease is renewed within its length."""


class LeaseRenewer:
    """The leases of the steps in flight, renewed together every ``lease_s / 3``."""

    def __init__(self, frontier: Frontier, clock: Clock) -> None:
        self._frontier = frontier
        self._clock = clock
        self.every_s = frontier.lease_s / RENEWALS_PER_LEASE
        self._held: dict[str, Lease] = {}
        self._due_at = 0.0

    def hold(self, lease: Lease) -> None:
        """Renew ``lease`` from now on (claimed just now: the next round is soon enough)."""
        if not self._held:
            self._due_at = self._clock.now() + self.every_s
        self._held[lease.token] = lease

    def release(self, lease: Lease) -> None:
        """Stop renewing ``lease`` (its step ended)."""
        self._held.pop(lease.token, None)

    def wait_s(self, now: float) -> float | None:
        """Seconds until the next round of renewals; None when no lease is held."""
        return max(0.0, self._due_at - now) if self._held else None

    async def renew_due(self, now: float) -> list[Lease]:
        """Renew every held lease to ``now + lease_s`` if a round is due; the leases lost.

        A lost lease (reaped, or handed out again) is no longer held: its step goes on, and
        its end will be refused by the store. A store error is logged, never raised: the
        leases stay held for the next round, and the loop's next claim meets the error.
        """
        if not self._held or now < self._due_at:
            return []
        self._due_at = now + self.every_s
        leases = list(self._held.values())
        lost: list[Lease] = []
        for index, lease in enumerate(leases):  # one after another: one connection a round
            try:
                current = await self._frontier.renew(lease, now)
            except StateError as exc:  # the rest would fail too: the next round tries them all
                left = len(leases) - index
                log.warning("%d of %d leases not renewed: %s", left, len(leases), exc)
                break
            if not current:
                lost.append(lease)
                if self._held.pop(lease.token, None) is not None:
                    log.debug("lease of %s lost: no longer current", lease.request.url)
        return lost
