"""Live crawl figures computed from events: what the progress bar and the summary show."""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from crawlfleet.models import Outcome, QueueCounts
from crawlfleet.monitoring.events import (
    EventBus,
    FetchAttempted,
    ItemDropped,
    ItemInvalid,
    ItemsStored,
    ParseFailed,
    QueueSampled,
    RequestSkipped,
)

RATE_WINDOW_S = 10.0


@dataclass(slots=True)
class DomainStats:
    """Counters for one politeness domain during this run."""

    pages: int = 0
    retries: int = 0
    dead: int = 0
    skipped: int = 0
    bytes: int = 0
    latency_total_s: float = 0.0
    statuses: Counter[int] = field(default_factory=Counter)

    @property
    def mean_latency_s(self) -> float:
        fetched = sum(self.statuses.values())
        return self.latency_total_s / fetched if fetched else 0.0


class LiveStats:
    """Subscribes to a bus and keeps this run's counters, rate and ETA."""

    def __init__(self, events: EventBus, started_at: float) -> None:
        self.started_at = started_at
        self.domains: dict[str, DomainStats] = defaultdict(DomainStats)
        self.items = 0
        self.items_dropped: Counter[str] = Counter()
        self.items_invalid = 0
        self.parse_errors = 0
        self.counts = QueueCounts(0, 0, 0, 0, 0)
        self._done_times: deque[float] = deque()
        events.subscribe(FetchAttempted, self._on_attempt)
        events.subscribe(RequestSkipped, self._on_skipped)
        events.subscribe(QueueSampled, self._on_sample)
        events.subscribe(ItemsStored, self._on_items)
        events.subscribe(ItemDropped, self._on_dropped)
        events.subscribe(ItemInvalid, self._on_invalid)
        events.subscribe(ParseFailed, self._on_parse_failed)

    @property
    def pages(self) -> int:
        return sum(d.pages for d in self.domains.values())

    @property
    def errors(self) -> int:
        return sum(d.retries + d.dead for d in self.domains.values())

    def rate(self, now: float) -> float:
        """Pages per second over the last few seconds."""
        while self._done_times and self._done_times[0] < now - RATE_WINDOW_S:
            self._done_times.popleft()
        window = min(RATE_WINDOW_S, max(now - self.started_at, 1e-3))
        return len(self._done_times) / window

    def eta_s(self, now: float) -> float | None:
        rate = self.rate(now)
        return self.counts.pending / rate if rate > 0 else None

    def _on_attempt(self, event: FetchAttempted) -> None:
        attempt = event.attempt
        stats = self.domains[attempt.domain]
        if attempt.status is not None:
            stats.statuses[attempt.status] += 1
            stats.latency_total_s += attempt.latency_s
        stats.bytes += attempt.bytes
        if attempt.outcome is Outcome.OK:
            stats.pages += 1
            self._done_times.append(attempt.at)
        elif attempt.outcome is Outcome.RETRY:
            stats.retries += 1
        elif attempt.outcome is Outcome.DEAD:
            stats.dead += 1

    def _on_skipped(self, event: RequestSkipped) -> None:
        self.domains[event.domain].skipped += 1

    def _on_sample(self, event: QueueSampled) -> None:
        self.counts = event.counts

    def _on_items(self, event: ItemsStored) -> None:
        self.items += event.count

    def _on_dropped(self, event: ItemDropped) -> None:
        self.items_dropped[event.reason] += 1

    def _on_invalid(self, event: ItemInvalid) -> None:
        self.items_invalid += 1

    def _on_parse_failed(self, event: ParseFailed) -> None:
        self.parse_errors += 1
