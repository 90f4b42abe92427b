"""The figures the dashboard shows, computed from the store's views (no HTML here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crawlfleet.counters import CrawlStats
from crawlfleet.frontier.drift_marks import drifts
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.monitoring.eta import Eta
from crawlfleet.monitoring.stats import Sample
from crawlfleet.monitoring.summary import block_state, strategy_text
from crawlfleet.records import Outcome

DONE_OUTCOMES = (Outcome.OK, Outcome.SKIPPED, Outcome.FAILED, Outcome.PARSE_ERROR)
TRIED_OUTCOMES = (
    Outcome.OK, Outcome.RETRY, Outcome.DEAD, Outcome.FAILED, Outcome.PARSE_ERROR, Outcome.MISMATCH
)  # fmt: skip


def duration(seconds: float | None) -> str:
    """``1:02:03``, ``02:03``, or ``--:--`` when unknown."""
    if seconds is None:
        return "--:--"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def count(stats: CrawlStats, outcomes: tuple[Outcome, ...]) -> int:
    return sum(stats.get(f"outcome.{o.value}") for o in outcomes)


def success_rate(stats: CrawlStats) -> float | None:
    """Pages ok ÷ attempts that tried to fetch (skips left out); None before any."""
    tried = count(stats, TRIED_OUTCOMES)
    return stats.pages / tried if tried else None


@dataclass(frozen=True, slots=True)
class DomainRow:
    """One line of the per-domain table."""

    domain: str
    queued: int
    in_flight: int
    done: int
    dead: int
    success_rate: float | None
    p50_s: float | None
    p95_s: float | None
    delay_s: float
    delay_source: str
    block: str
    strategy: str
    drifts: dict[str, str]
    """Parser -> drift mark on the domain (``frontier/drift_marks.py``)."""
    drift_fields: dict[str, dict[str, list[float | None]]]
    """Parser -> expected field -> [fill rate at rest, fill rate in the run that fired], of
    each drift the domain has (``DriftTest.field_diff``; None: no items to rate)."""

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def domain_row(view: DomainView, now: float) -> DomainRow:
    s = view.stats
    return DomainRow(
        domain=view.domain,
        queued=view.queued,
        in_flight=view.in_flight,
        done=count(s, DONE_OUTCOMES),
        dead=s.get(f"outcome.{Outcome.DEAD.value}"),
        success_rate=success_rate(s),
        p50_s=s.latency_quantile_s(0.5),
        p95_s=s.latency_quantile_s(0.95),
        delay_s=view.effective_delay_s,
        delay_source=view.delay_source.value,
        block=block_state(view, now),
        strategy=strategy_text(view),
        drifts=drifts(view.strategy),
        drift_fields={
            parser: {name: list(rates) for name, rates in view.drift[parser].field_diff().items()}
            for parser in drifts(view.strategy)
            if parser in view.drift
        },
    )


def eta_dict(eta: Eta) -> dict[str, Any]:
    return {
        "eta_s": eta.eta_s,
        "naive_eta_s": eta.naive_s,
        "politeness_bound_s": eta.politeness_s,
        "bottleneck": eta.bottleneck,
        "slowest_domain": None if eta.slowest is None else eta.slowest.domain,
    }


def sample_dict(sample: Sample, state: str) -> dict[str, Any]:
    """A crawl's figures as JSON-ready values (``/api/crawls``)."""
    c = sample.counts
    return {
        "state": state,
        "at": sample.at,
        "counts": {"queued": c.queued, "leased": c.leased, "done": c.done, "dead": c.dead,
                   "seen": c.seen},
        "finished": sample.finished,
        "total": sample.finished + c.pending,
        "rate": sample.rate,
        "errors": sample.stats.errors,
        "dropped": {limit.value: n for limit, n in sample.stats.dropped().items()},
        **eta_dict(sample.eta),
    }  # fmt: skip
