"""What the frontier's stores record about the work: attempts and how they ended, dead
letters, and how many requests are in each state.

Plain dataclasses, like ``models``: the attempt log (SQLite, Redis, PostgreSQL) keeps an
``Attempt`` as JSON with ``to_dict`` / ``from_dict``.
"""

from __future__ import annotations

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
