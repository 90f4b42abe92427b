"""A politeness-aware ETA: a crawl cannot finish before its slowest domain does.

The store spaces the claims of one domain by its effective delay ``d`` and rests the domain
``d`` after each response, so a domain with ``c`` in-flight slots and a mean latency ``L``
serves one request every ``max(d, (d + L) / c)`` seconds (``d + L`` with one slot). Its
queued work therefore needs at least::

    wait until its ready time + (queued - 1) * period + L

The crawl ETA is the larger of the slowest domain's bound and the naive ``remaining ÷ rate``
of the whole fleet; the domain that sets it is the **bottleneck**. The naive figure alone is
wrong by orders of magnitude when one big domain has a crawl delay and the fast ones finish
first: the fleet's rate falls to the slow domain's pace only after they are done.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crawlfleet.frontier.store_types import DomainView


@dataclass(frozen=True, slots=True)
class DomainLoad:
    """What the ETA needs of one domain: its queued work and how fast it may be served."""

    domain: str
    queued: int
    effective_delay_s: float
    max_in_flight: int
    mean_latency_s: float = 0.0
    ready_in_s: float = 0.0
    """Seconds until the domain may be served again (a rest, a cooldown, a Retry-After)."""

    @property
    def period_s(self) -> float:
        """Seconds between two requests to the domain at its allowed pace."""
        delay_s = self.effective_delay_s
        return max(delay_s, (delay_s + self.mean_latency_s) / max(1, self.max_in_flight))

    @property
    def bound_s(self) -> float:
        """The least time the domain's queued requests need; 0 with nothing queued."""
        if self.queued <= 0:
            return 0.0
        return self.ready_in_s + (self.queued - 1) * self.period_s + self.mean_latency_s


def load_of(view: DomainView, now: float) -> DomainLoad:
    """The ``DomainLoad`` of a store's ``DomainView`` read at ``now`` (epoch seconds)."""
    return DomainLoad(
        domain=view.domain,
        queued=view.queued,
        effective_delay_s=view.effective_delay_s,
        max_in_flight=view.max_in_flight,
        mean_latency_s=view.stats.mean_latency_s,
        ready_in_s=max(0.0, view.ready_at - now),
    )


@dataclass(frozen=True, slots=True)
class Eta:
    """A crawl's estimated remaining time and what sets it.

    ``eta_s`` is None without a rate (a crawl starting, or stalled): ``politeness_s`` is then
    still a lower bound.
    ``bottleneck`` is the domain whose politeness bound sets ``eta_s`` (None when the
    fleet's rate does).
    """

    eta_s: float | None
    naive_s: float | None
    slowest: DomainLoad | None
    politeness_s: float = 0.0
    """The slowest domain's bound (0 without one)."""

    @property
    def bottleneck(self) -> str | None:
        if self.slowest is None or self.politeness_s <= 0 or self.eta_s is None:
            return None
        if self.naive_s is not None and self.naive_s > self.politeness_s:
            return None
        return self.slowest.domain


def naive_eta_s(remaining: int, rate: float) -> float | None:
    """``remaining ÷ rate``: 0 with nothing remaining, None without a rate."""
    if remaining <= 0:
        return 0.0
    return remaining / rate if rate > 0 else None


def estimate(
    remaining: int, rate: float, loads: Iterable[DomainLoad], *, loads_age_s: float = 0.0
) -> Eta:
    """The ETA of a crawl with ``remaining`` requests pending, finishing ``rate`` per second.

    ``loads`` read ``loads_age_s`` ago: their bounds are that much closer now.
    """
    naive = naive_eta_s(remaining, rate)
    slowest: DomainLoad | None = None
    for load in loads:
        if load.queued > 0 and (slowest is None or load.bound_s > slowest.bound_s):
            slowest = load
    if remaining <= 0:
        return Eta(0.0, naive, None)
    bound = 0.0 if slowest is None else max(0.0, slowest.bound_s - loads_age_s)
    if naive is None:
        return Eta(None, None, slowest, bound)
    return Eta(max(naive, bound), naive, slowest, bound)
