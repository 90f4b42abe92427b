"""Operating a crawl: the ``Operations`` port and the rows it returns.

``Operations`` lists crawls, reads each one (``CrawlReader``: counts, statistics, domains,
dead letters), its attempt log, items, workers and proxies, and runs the operator's actions
(requeue and purge dead letters, pause, resume, cancel, add URLs, re-open a parser).
``embedded.EmbeddedOperations`` serves the crawl of one state directory, read-only but for
actions; ``distributed.DistributedOperations`` every crawl of a fleet's Redis and
PostgreSQL. The dashboard, the operating commands and the Python API go through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from crawlfleet.clock import Clock
from crawlfleet.counters import CrawlStats
from crawlfleet.errors import StateError
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.monitoring.metric_snapshot import Beat
from crawlfleet.proxies.protocols import ProxyState
from crawlfleet.records import Attempt, AttemptFilter, DeadLetter, QueueCounts
from crawlfleet.runtime.control import RunState

ITEM_ROWS = 2000
"""Data quality and samples are computed over the latest this many items stored."""


class ActionRefused(StateError):
    """An action that cannot run now (the crawl holds its state, or was cancelled); the
    message says why."""


@dataclass(frozen=True, slots=True)
class Added:
    """What ``add_urls`` did: URLs queued, not admitted (seen before, or over the page
    budget), and refused (bad URL, out of scope) with why."""

    admitted: int
    not_admitted: int
    rejected: list[tuple[str, str]] = field(default_factory=list)
    dispatching: bool = False
    """Whether a dispatcher runs the crawl now (else the URLs wait for it to run again)."""


class CrawlReader(Protocol):
    """One crawl's figures: a ``Frontier``, or the read-only state reader."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...

    async def domain(self, domain: str) -> DomainView: ...

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]: ...


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """A worker as its heartbeat shows it; ``pages_per_s`` over the last ``RATE_WINDOW_S``.

    ``in_flight`` and ``pages_per_s`` are None when unknown (a worker that does not report
    them, or a single reading so far).
    """

    name: str
    seen_ago_s: float
    live: bool
    crawl: str
    concurrency: int
    queues: tuple[str, ...]
    in_flight: int | None = None
    pages_per_s: float | None = None


@dataclass(slots=True)
class ItemSample:
    """The latest items of one type: how many were read, fill counts per field, a few rows."""

    item_type: str
    read: int = 0
    filled: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)

    def fill_rates(self) -> dict[str, float]:
        return {name: n / self.read for name, n in sorted(self.filled.items())} if self.read else {}


SAMPLES_PER_TYPE = 3


def is_filled(value: object) -> bool:
    """A field counts as filled when present and not None, "" or an empty list or dict."""
    return value is not None and value != "" and value != [] and value != {}


def sample_items(rows: Sequence[tuple[str, Any]]) -> list[ItemSample]:
    """Fill counts and samples per type from ``(item_type, data)`` rows, newest first."""
    found: dict[str, ItemSample] = {}
    for item_type, data in rows:
        if not isinstance(data, dict):
            continue
        sample = found.setdefault(item_type, ItemSample(item_type))
        sample.read += 1
        for name, value in data.items():
            sample.filled[name] = sample.filled.get(name, 0) + is_filled(value)
        if len(sample.samples) < SAMPLES_PER_TYPE:
            sample.samples.append(data)
    return [found[name] for name in sorted(found)]


class Operations(Protocol):
    """Everything an operator reads of, or does to, the crawls of one runtime.

    Every ``crawl_id`` method raises ``StateError`` when there is no such crawl (or its
    store cannot be read: one line, no password) and ``ConfigError`` for what the runtime
    cannot do (``cancel`` and ``add_urls`` of an embedded crawl).
    """

    mode: str

    async def probe(self) -> None:
        """Check the runtime's state can be read, before serving it (``ConfigError`` for a
        state directory that is not one, ``StateError`` for a store that cannot be opened)."""
        ...

    def describe(self, crawl_id: str) -> str:
        """How a message names the crawl: ``crawl in DIR`` or ``crawl ID``."""
        ...

    async def crawl_ids(self) -> list[str]: ...

    async def reader(self, crawl_id: str) -> CrawlReader: ...

    async def asked(self, crawl_id: str) -> RunState:
        """What the operator asked of the crawl: running, paused or cancelled."""
        ...

    async def run_state(self, crawl_id: str, counts: QueueCounts) -> str:
        """``running``, ``paused``, ``finished`` or ``stopped`` (or a runtime's own word)."""
        ...

    async def no_worker(self, crawl_id: str) -> str | None:
        """Why no live worker serves the crawl; None when one does (or none is needed)."""
        ...

    async def attempts(self, crawl_id: str, where: AttemptFilter, limit: int) -> list[Attempt]: ...

    async def items(self, crawl_id: str) -> list[ItemSample]: ...

    async def workers(self) -> list[WorkerRow]:
        """The processes doing the work, most recently seen first; called on every sample,
        so the pages/s of each builds up between page views."""
        ...

    async def beats(self) -> Sequence[Beat]:
        """The workers' heartbeats, for ``/metrics`` (none for an embedded crawl)."""
        ...

    async def proxies(self, crawl_id: str) -> list[ProxyState]:
        """The crawl's proxy records (none without ``[crawl.proxies]``)."""
        ...

    async def requeue_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        """Put the dead letters whose fingerprints start with ``prefixes`` (None: all) back
        in the queue; ``ConfigError`` for a prefix that names none or several."""
        ...

    async def purge_dead(self, crawl_id: str, prefixes: Sequence[str] | None) -> int:
        """Forget dead letters (they stay seen), chosen as ``requeue_dead`` chooses them."""
        ...

    async def requeue_class(self, crawl_id: str, name: str) -> int: ...

    async def purge_class(self, crawl_id: str, name: str) -> int: ...

    async def set_paused(self, crawl_id: str, paused: bool) -> None:
        """Pause or resume; ``StateError`` (``ActionRefused``) for a cancelled crawl."""
        ...

    async def cancel(self, crawl_id: str) -> None:
        """Stop the crawl for good (its state stays)."""
        ...

    async def add_urls(
        self, crawl_id: str, urls: Sequence[str], *, clock: Clock | None = None
    ) -> Added:
        """Offer ``urls`` to the crawl as seeds (depth 0), scoped and robots-prepared as its
        dispatcher would; ``ConfigError`` for a URL the crawl cannot take."""
        ...

    async def resume_parser(self, crawl_id: str, parser: str, domain: str) -> int: ...

    async def stored_quality(self, crawl_id: str) -> dict[str, Any] | None:
        """The quality scores kept beside the crawl's items, as last written
        (``monitoring/postgres_quality.py``); None where there are none (an embedded crawl's
        are its store's counters, shown already)."""
        ...

    def samples_root(self, crawl_id: str) -> Path | None:
        """Where the crawl's mismatched pages are kept (``monitoring/samples.py``), when this
        dashboard can read them; None when it cannot (a distributed crawl's workers keep
        theirs in their own ``--state`` directory)."""
        ...

    async def close(self) -> None: ...
