"""What a crawl run did, read from the store's counters: the summary, ``stats.json``, the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from crawlfleet.counters import LIMIT_UNITS, CrawlStats
from crawlfleet.frontier.store_types import DomainView
from crawlfleet.monitoring.attempt_log import AttemptReader
from crawlfleet.monitoring.deadletters import PAGE, letter_class
from crawlfleet.monitoring.outcome import SHORTFALL_EXIT, Finding, RunFacts, judge
from crawlfleet.monitoring.quality_scores import quality_report
from crawlfleet.records import DeadLetter, Outcome, QueueCounts

PARSE_ERROR_EXIT = 3
"""The exit code of a crawl in which more pages failed to parse than allowed."""

CANCELLED_EXIT = 4
"""The exit code of a crawl that was cancelled (``crawlfleet cancel``)."""

INTERRUPTED_EXIT = 130
"""The exit code of a crawl stopped before it was complete (Ctrl-C, SIGTERM, ``stop``)."""


@dataclass(frozen=True, slots=True)
class CrawlResult:
    """The statistics of a crawl when its run ended (embedded or distributed alike).

    ``reason`` is ``complete`` (nothing pending), ``interrupted`` or ``cancelled``. ``stats``
    and ``domains`` are the store's counters for the whole crawl (a resumed crawl includes
    earlier runs); ``run`` the counters of this run alone (``elapsed_s`` is this run's time);
    ``top_parse_errors`` are the most frequent parser errors with their counts;
    ``exported_items`` how many items went to ``settings.output`` (None: no export);
    ``findings`` what the outcome judge (``monitoring.outcome``) said of a complete run.
    """

    crawl_id: str
    reason: str
    counts: QueueCounts
    stats: CrawlStats
    domains: Mapping[str, CrawlStats] = field(default_factory=dict)
    top_parse_errors: Sequence[tuple[str, int]] = ()
    elapsed_s: float = 0.0
    exported_items: int | None = None
    run: CrawlStats = field(default_factory=CrawlStats)
    findings: Sequence[Finding] = ()
    top_reject_reasons: Sequence[tuple[str, str, int]] = ()
    """(reason, item type, count) of the most frequent reasons items were rejected."""

    @property
    def complete(self) -> bool:
        return self.reason == "complete"

    @property
    def parse_errors(self) -> int:
        return self.stats.get(f"outcome.{Outcome.PARSE_ERROR.value}")

    @property
    def shortfall(self) -> bool:
        """Whether the run got nothing or lost something (a finding that changes the exit)."""
        return any(finding.shortfall for finding in self.findings)

    def exit_code(self, max_parse_errors: int = 0, *, allow_shortfall: bool = False) -> int:
        """0 when complete, 130 when interrupted, 4 when cancelled, 3 when too many pages failed
        to parse, 5 when complete with a shortfall (unless ``allow_shortfall``)."""
        if self.reason == "cancelled":
            return CANCELLED_EXIT
        if not self.complete:
            return INTERRUPTED_EXIT
        if self.parse_errors > max_parse_errors:
            return PARSE_ERROR_EXIT
        return SHORTFALL_EXIT if self.shortfall and not allow_shortfall else 0

    def to_dict(self) -> dict[str, Any]:
        """The figures of the summary, as JSON-ready values (``stats.json``)."""
        c = self.counts
        return {
            "crawl_id": self.crawl_id,
            "reason": self.reason,
            "elapsed_s": round(self.elapsed_s, 3),
            "started_at": self.stats.started_at,
            "counts": {
                "queued": c.queued,
                "leased": c.leased,
                "done": c.done,
                "dead": c.dead,
                "seen": c.seen,
            },
            "dropped": {limit.value: n for limit, n in self.stats.dropped().items()},
            "filtered": {reason.value: n for reason, n in self.stats.filtered().items()},
            "run": dict(sorted(self.run.counters.items())),
            "totals": dict(sorted(self.stats.counters.items())),
            "domains": {
                domain: dict(sorted(stats.counters.items()))
                for domain, stats in sorted(self.domains.items())
            },
            "exported_items": self.exported_items,
            "top_parse_errors": [
                {"error": error, "count": count} for error, count in self.top_parse_errors
            ],
            "top_reject_reasons": [
                {"reason": reason, "type": item_type, "count": count}
                for reason, item_type, count in self.top_reject_reasons
            ],
            "findings": [
                {"kind": f.kind, "line": f.line, "shortfall": f.shortfall} for f in self.findings
            ],
            "quality": quality_report(self.stats, self.domains),
        }


def dropped_line(stats: CrawlStats) -> str | None:
    """One line saying what limits dropped, by unit then limit, or None if nothing.

    ``dropped by limits: 212 links (max_links_per_page 200, max_depth 12), 1 sitemaps
    (sitemap_max_bytes 1); raise the setting to keep them``
    """
    dropped = stats.dropped()
    if not dropped:
        return None
    by_unit: dict[str, list[str]] = {}
    totals: dict[str, int] = {}
    for limit, count in dropped.items():
        unit = LIMIT_UNITS[limit]
        by_unit.setdefault(unit, []).append(f"{limit.value} {count}")
        totals[unit] = totals.get(unit, 0) + count
    parts = [f"{totals[unit]} {unit} ({', '.join(names)})" for unit, names in by_unit.items()]
    return f"dropped by limits: {', '.join(parts)}; raise the setting to keep them"


class ResultSource(Protocol):
    """What a crawl's result is read from (``Frontier``)."""

    async def stats(self) -> CrawlStats: ...

    async def counts(self) -> QueueCounts: ...

    async def domains(self, limit: int = 100) -> list[DomainView]: ...

    async def dead_letters(self, limit: int = 100, offset: int = 0) -> list[DeadLetter]: ...


SUMMARY_DOMAINS = 1000
"""The summary lists at most this many domains (those with the most requests admitted)."""


DEAD_LETTERS_READ = 10_000
"""The judge classes at most this many dead letters (the oldest); the count is always exact."""


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the judge needs besides the store: the run's seeds and start, how to name the crawl.

    ``seed_domains``: the politeness keys of the seeds; ``baseline``: the crawl's counters when
    this run began; ``target``: the ``crawlfleet dlq`` options naming this crawl.
    """

    seed_domains: Sequence[str] = ()
    baseline: CrawlStats = field(default_factory=CrawlStats)
    target: str = ""
    distributed: bool = False
    revisit: str = "off"


async def read_result(
    source: ResultSource,
    attempts: AttemptReader | None,
    *,
    crawl_id: str,
    reason: str,
    elapsed_s: float,
    context: RunContext | None = None,
) -> CrawlResult:
    """The crawl's result from its store's counters (and its attempt log's top errors).

    A complete run is judged (``monitoring.outcome``) with ``context``.
    """
    context = context or RunContext()
    views = await source.domains(SUMMARY_DOMAINS)
    top = await attempts.top_errors(Outcome.PARSE_ERROR) if attempts is not None else []
    stats, counts = await source.stats(), await source.counts()
    domains = {view.domain: view.stats for view in views}
    run = since(stats, context.baseline)
    findings: list[Finding] = []
    if reason == "complete":
        failures = await attempts.top_errors(Outcome.FAILED, 20) if attempts is not None else []
        facts = RunFacts(
            seed_domains=context.seed_domains,
            stats=stats,
            run=run,
            domains=domains,
            dead=counts.dead,
            done=counts.done,
            dead_classes=await _dead_classes(source, counts.dead),
            failures=failures,
            target=context.target,
            distributed=context.distributed,
            revisit=context.revisit,
        )
        findings = judge(facts)
    return CrawlResult(
        crawl_id=crawl_id,
        reason=reason,
        counts=counts,
        stats=stats,
        domains=domains,
        top_parse_errors=tuple(top),
        elapsed_s=elapsed_s,
        run=run,
        findings=tuple(findings),
    )


def since(stats: CrawlStats, baseline: CrawlStats) -> CrawlStats:
    """The counters added after ``baseline`` was read (this run's share of the totals)."""
    counters = {
        name: value - baseline.counters.get(name, 0) for name, value in stats.counters.items()
    }
    return CrawlStats({name: value for name, value in counters.items() if value})


async def _dead_classes(source: ResultSource, dead: int) -> dict[str, dict[str, int]]:
    """Per domain, the dead letters by error class (the oldest ``DEAD_LETTERS_READ``)."""
    found: dict[str, dict[str, int]] = {}
    offset = 0
    while offset < min(dead, DEAD_LETTERS_READ):
        page = await source.dead_letters(PAGE, offset)
        for letter in page:
            per_domain = found.setdefault(letter.request.domain, {})
            name = letter_class(letter)
            per_domain[name] = per_domain.get(name, 0) + 1
        if len(page) < PAGE:
            break
        offset += len(page)
    return found


def block_state(view: DomainView, now: float) -> str:
    """``ok``, or the block level with its cooldown and reason, and any Retry-After wait."""
    parts = []
    if view.level > 0:
        parts.append(f"level {view.level}")
    if view.cooldown_until > now:
        parts.append(f"cooldown {view.cooldown_until - now:.0f} s")
    if view.retry_after_until > now:
        parts.append(f"Retry-After {view.retry_after_until - now:.0f} s")
    if parts and view.block_reason:
        parts.append(view.block_reason)
    return ", ".join(parts) or "ok"


def strategy_text(view: DomainView) -> str:
    """The domain's strategy slot as ``key=value`` pairs (``rung``, ``fetcher``...), or
    ``default`` when it is empty."""
    return ", ".join(f"{k}={v}" for k, v in sorted(view.strategy.items())) or "default"
