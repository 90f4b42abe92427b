"""The values a ``QueueStore`` (``frontier/protocols.py``) takes and returns.

In: the crawl-wide default politeness (``DomainPolicy``, ``BlockRules``), admission caps
(``Budget``), where a delay came from (``DelaySource``), what an attempt did (``Report``,
its ``Signal``). Out: the result of a lease end (``Ended``, its ``PolicyChange``) and one
domain as every process sees it (``DomainView``). Both ways: what is known of a fetched URL
(``Visit``). ``LEASE_EXPIRED`` is the error ``reap`` records. Frozen dataclasses and string
enums, shared by every backend and the frontier's callers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.drift import DriftTest
from crawlfleet.records import Attempt

DEFAULT_MAX_CRAWL_DELAY_S = 3600.0
"""The longest robots ``Crawl-delay`` honoured unless raised (decision 0039)."""
LEASE_EXPIRED = "lease expired (worker lost)"
"""The error ``reap`` records in the history of a request whose lease expired."""


@dataclass(frozen=True, slots=True)
class BlockRules:
    """When a domain escalates (slows down) and when it comes back.

    A domain keeps a window of its last ``window`` judged responses (a block, a refused URL
    with its kind, or a clean success; other outcomes do not count). When a block or a
    refusal arrives, the domain's level goes up by one (at most ``max_level``) if the window
    shows a ban: at least ``min_samples`` responses of which a share of at least
    ``threshold`` are blocks; or a full window (``window`` responses) with no success, or
    with a share of at least ``refusal_threshold`` refused or blocked across at least
    ``refusal_kinds`` kinds of URL (decision 0044). Its window is then cleared and it rests
    ``cooldown_s * 2 ** (level - 1)``. After ``recover_after`` clean successes in a row the
    level goes down by one. ``ladder`` holds the rungs each level climbs (``frontier/ladder.py``):
    the same step changes the domain's strategy slot; with no rungs it is left alone.
    """

    window: int = 20
    min_samples: int = 5
    threshold: float = 0.5
    recover_after: int = 20
    max_level: int = 4
    cooldown_s: float = 30.0
    ladder: tuple[str, ...] = ()
    refusal_threshold: float = 0.8
    refusal_kinds: int = 3


class DelaySource(StrEnum):
    """Where a domain's base delay came from. An ``override`` is never replaced by robots.

    A store records ``config`` for a domain on the crawl-wide delay; a view shows it as the
    settings layer that gave that delay (``DomainPolicy.delay_source``): ``default``,
    ``file``, ``env`` or ``cli``.
    """

    CONFIG = "config"
    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    CLI = "cli"
    ROBOTS = "robots"
    ROBOTS_CAPPED = "robots-capped"
    """robots.txt asked for a longer Crawl-delay than ``max_crawl_delay_s``: the cap is used."""
    OVERRIDE = "override"

    @property
    def from_robots(self) -> bool:
        return self in (DelaySource.ROBOTS, DelaySource.ROBOTS_CAPPED)


@dataclass(frozen=True, slots=True)
class DomainPolicy:
    """The crawl-wide default politeness: delay, in-flight cap and block rules.

    ``max_crawl_delay_s``: the most a robots ``Crawl-delay`` is honoured up to (a larger one
    is cut to it, with a warning and the source ``robots-capped``). ``delay_source``: the
    settings layer that gave ``delay_s`` (``default``, ``file``, ``env`` or ``cli``), what a
    domain on this delay shows as its source.
    """

    delay_s: float
    max_in_flight: int
    blocks: BlockRules = field(default_factory=BlockRules)
    max_crawl_delay_s: float = DEFAULT_MAX_CRAWL_DELAY_S
    delay_source: DelaySource = DelaySource.DEFAULT


class Signal(StrEnum):
    """What one response says about being blocked by its domain."""

    NONE = "none"
    """Neither: an error, a 404, a skip. Leaves the block window alone."""
    SUCCESS = "success"
    """A clean 2xx."""
    BLOCK = "block"
    """A 429, a challenge page, a refusal of a URL that succeeded before: evidence of a ban."""
    REFUSED = "refused"
    """A plain 401, 403 or 451: this URL is refused; a ban only when most URLs are."""


@dataclass(frozen=True, slots=True)
class Report:
    """What one attempt did, recorded with the lease's end in one atomic step.

    ``counters`` are added to the crawl's and the domain's statistics beside those of
    ``crawlfleet.counters.for_attempt(attempt)`` (which the store derives itself): items
    stored, invalid or duplicate by type. ``block_until`` > 0 keeps the domain quiet until
    then (a Retry-After), recorded with ``reason``. ``visit``, given to ``complete``, becomes
    what is known of the request's URL (``remember``'s rule) in the same atomic step (the
    Redis store writes it just before the lease end, by its own script: a lease no longer
    current may then still record it, which the URL's next visit overwrites).
    """

    attempt: Attempt
    signal: Signal = Signal.NONE
    reason: str = ""
    counters: Mapping[str, float] = field(default_factory=dict)
    block_until: float = 0.0
    visit: Visit | None = None


@dataclass(frozen=True, slots=True)
class PolicyChange:
    """A domain's block level moved (``escalated`` or ``recovered``), with why.

    ``rung`` is the ladder rung of the new level (``""`` at level 0 or without a ladder) and
    ``strategy`` the domain's strategy slot as the same step left it (None: not touched).
    """

    domain: str
    level: int
    change: str
    reason: str
    until: float
    rung: str = ""
    strategy: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Ended:
    """The result of a lease end. Truthy when the lease was current and the change applied."""

    current: bool
    change: PolicyChange | None = None

    def __bool__(self) -> bool:
        return self.current


@dataclass(frozen=True, slots=True)
class DomainView:
    """One domain's policy, queue and statistics, as every process of the crawl sees them."""

    domain: str
    base_delay_s: float
    delay_source: DelaySource
    max_in_flight: int
    level: int
    effective_delay_s: float
    ready_at: float
    cooldown_until: float
    block_reason: str
    retry_after_until: float
    strategy: Mapping[str, str]
    queued: int
    in_flight: int
    stats: CrawlStats
    drift: Mapping[str, DriftTest] = field(default_factory=dict)
    """Parser -> its drift test on the domain (``frontier/drift.py``)."""


@dataclass(frozen=True, slots=True)
class Visit:
    """What the frontier keeps about a fetched URL for its next visit.

    ``etag`` and ``last_modified`` are the validators of its last 200 ("" when it sent
    none), ``content_hash`` the hex SHA-256 of that body; ``interval_s`` is the interval
    that led to ``next_at`` (epoch s; ``inf``: never due again), ``priority`` the queue
    priority of the revisit; ``item_types`` the types its last parse yielded (for the
    recrawl rules of an unchanged page, which is not parsed), ``visited_at`` when the visit
    was made (epoch s; a sitemap ``<lastmod>`` after it makes the URL due at once).
    """

    etag: str = ""
    last_modified: str = ""
    content_hash: str = ""
    interval_s: float = float("inf")
    next_at: float = float("inf")
    priority: int = 0
    item_types: tuple[str, ...] = ()
    visited_at: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"etag": self.etag, "last_modified": self.last_modified,
                "content_hash": self.content_hash, "interval_s": self.interval_s,
                "next_at": self.next_at, "priority": self.priority,
                "item_types": list(self.item_types), "visited_at": self.visited_at}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Budget:
    """Admission caps; None means unlimited."""

    max_total: int | None = None
    max_per_domain: int | None = None
