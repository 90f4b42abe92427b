"""What the frontier's stores record about the work: attempts and how they ended, dead
letters, and how many requests are in each state.

Plain dataclasses, like ``models``: the attempt log (SQLite, Redis, PostgreSQL) keeps an
``Attempt`` as JSON with ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from crawlfleet.models import CrawlRequest


class Outcome(StrEnum):
    """How one fetch attempt ended."""

    OK = "ok"
    RETRY = "retry"
    DEAD = "dead"
    SKIPPED = "skipped"
    FAILED = "failed"
    PARSE_ERROR = "parse_error"
    """Fetched, but its parser raised or ran over its budget: recorded, counted, not retried."""
    MISMATCH = "mismatch"
    """Parsed, but the page missed its parser's expectations (``parsing/expect.py``): items
    not stored; retried, then dead-lettered as ``mismatch: <parser>``."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One line of the attempt log: what happened when a worker fetched a URL once."""

    url: str
    fingerprint: str
    domain: str
    worker: str
    outcome: Outcome
    status: int | None
    bytes: int
    latency_s: float
    retry: int
    at: float
    error: str | None = None
    fetcher: str = "http"
    detail: str | None = None
    """A longer account of ``error`` (a parser's traceback), or of what limits dropped from
    an ok page's links (``runtime.step.attempts.limits_note``), kept in the attempt log."""
    session_id: str | None = None
    proxy_id: str | None = None
    tier: int | None = None
    """The crawl session, proxy id and tier the fetch went through (``models.Route``)."""
    screenshot: str | None = None
    """The path of the failed page's screenshot (browser fetcher, ``browser_screenshots``)."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        return cls(**{**data, "outcome": Outcome(data["outcome"])})


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A request that used its retry budget, with the errors of its attempts."""

    request: CrawlRequest
    errors: tuple[str, ...]
    died_at: float


@dataclass(frozen=True, slots=True)
class QueueCounts:
    """How many requests are in each state; ``seen`` counts every fingerprint ever admitted."""

    queued: int
    leased: int
    done: int
    dead: int
    seen: int

    @property
    def pending(self) -> int:
        return self.queued + self.leased


@dataclass(frozen=True, slots=True)
class AttemptFilter:
    """Which attempts to list: any of the fields left None matches every attempt."""

    domain: str | None = None
    outcome: str | None = None
    status: int | None = None


ATTEMPT_COLUMNS = (
    "url, fingerprint, domain, worker, outcome, status, bytes, latency_s, retry, at, error, "
    "fetcher, detail, session_id, proxy_id, tier, screenshot"
)
"""The columns of an attempt log table (SQLite or PostgreSQL), in ``attempt_of``'s order."""


def attempt_of(row: Sequence[object]) -> Attempt:
    """An ``Attempt`` from a row of ``ATTEMPT_COLUMNS`` (``at`` in epoch seconds)."""
    url, fp, domain, worker, outcome, status, size, latency_s, retry, at, error = row[:11]
    fetcher, detail, session_id, proxy_id, tier, screenshot = row[11:]
    return Attempt(
        url=str(url),
        fingerprint=str(fp),
        domain=str(domain),
        worker=str(worker),
        outcome=Outcome(str(outcome)),
        status=None if status is None else int(str(status)),
        bytes=int(str(size)),
        latency_s=float(str(latency_s)),
        retry=int(str(retry)),
        at=float(str(at)),
        error=None if error is None else str(error),
        fetcher=str(fetcher),
        detail=None if detail is None else str(detail),
        session_id=None if session_id is None else str(session_id),
        proxy_id=None if proxy_id is None else str(proxy_id),
        tier=None if tier is None else int(str(tier)),
        screenshot=None if screenshot is None else str(screenshot),
    )
