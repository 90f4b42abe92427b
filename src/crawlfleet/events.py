"""Typed events of a crawl and the bus that carries them.

Every step of the crawl emits one of these; stats, metrics, logs, the attempt log, the
progress bar and the dashboard subscribe. Handlers are plain synchronous callables and must
be cheap: they run inline, on the crawl's hot path.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from crawlfleet.records import Attempt, QueueCounts


@dataclass(frozen=True, slots=True)
class CrawlStarted:
    crawl_id: str
    seeds: int
    at: float


@dataclass(frozen=True, slots=True)
class LinksAdded:
    """A batch of URLs offered to the frontier; ``admitted`` were new and within budget."""

    offered: int
    admitted: int


@dataclass(frozen=True, slots=True)
class FetchAttempted:
    """One fetch attempt ended (whatever its outcome)."""

    attempt: Attempt


@dataclass(frozen=True, slots=True)
class RequestSkipped:
    """A request completed without a fetch: robots.txt, a filter, a non-HTML parser input."""

    url: str
    domain: str
    reason: str


@dataclass(frozen=True, slots=True)
class DomainBlocked:
    """A response asked the whole domain to wait (Retry-After) until ``until``."""

    domain: str
    until: float
    reason: str


@dataclass(frozen=True, slots=True)
class ParserDrifted:
    """The drift test of ``parser`` on ``domain`` fired after ``pages`` pages
    (``runtime/step/drift.py``); ``paused``: its pages there are no longer fetched."""

    parser: str
    domain: str
    pages: int
    paused: bool


@dataclass(frozen=True, slots=True)
class DomainEscalated:
    """Too many recent responses of the domain were blocks: it slows down to ``level``.

    Its delay is multiplied by ``2 ** level``; it rests until ``until`` first. ``rung``: the
    strategy ladder's rung of the new level (``frontier/ladder.py``; ``""`` without one).
    """

    domain: str
    level: int
    reason: str
    until: float
    rung: str = ""


@dataclass(frozen=True, slots=True)
class DomainRecovered:
    """The domain answered cleanly for a while: its block level went down to ``level``.

    ``rung``: the ladder's rung of the new level (``""`` at level 0 or without a ladder).
    """

    domain: str
    level: int
    reason: str
    rung: str = ""


@dataclass(frozen=True, slots=True)
class ParseFailed:
    url: str
    parser: str
    error: str
    traceback_text: str


@dataclass(frozen=True, slots=True)
class ItemsStored:
    item_type: str
    count: int
    domain: str


@dataclass(frozen=True, slots=True)
class SchemaChanged:
    """Stored items of a type showed a schema change first (``pipeline/schema_watch.py``):
    ``change`` is ``new field``, ``type change``, ``field gone`` or ``too many fields``;
    ``urls`` the first items that showed it."""

    item_type: str
    change: str
    field: str
    detail: str
    urls: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ItemDropped:
    item_type: str
    reason: str
    url: str
    domain: str


@dataclass(frozen=True, slots=True)
class ItemInvalid:
    """An item failed validation; kept with the reason, not silently dropped."""

    item_type: str
    reason: str
    url: str
    domain: str


@dataclass(frozen=True, slots=True)
class QueueSampled:
    """The frontier's counts, sampled periodically."""

    counts: QueueCounts
    at: float


@dataclass(frozen=True, slots=True)
class CrawlFinished:
    crawl_id: str
    counts: QueueCounts
    at: float
    reason: str


E = TypeVar("E")


class EventBus:
    """Calls every handler subscribed to an event's exact type, in subscription order."""

    def __init__(self) -> None:
        self._handlers: dict[type[Any], list[Callable[[Any], None]]] = defaultdict(list)

    def subscribe(self, event_type: type[E], handler: Callable[[E], None]) -> None:
        self._handlers[event_type].append(handler)

    def emit(self, event: object) -> None:
        for handler in self._handlers.get(type(event), ()):
            handler(event)
