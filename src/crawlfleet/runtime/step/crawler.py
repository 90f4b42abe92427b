"""The crawl step for one leased request: allow, fetch, judge, parse, store, enqueue, complete.

This module knows no backend and keeps no per-domain state: every runner calls
``Crawler.process`` with a lease from the frontier, and everything a step learns about a
domain (its response judged a block, a refusal or a success, a Retry-After, the statistics)
goes back with the lease's end in one ``Report``, which the store applies atomically for
every process.

Order within a step makes every crash point recoverable by refetching: discovered links are
enqueued, then items stored, then the lease completed. A crash before completion leaves the
lease to expire and come back.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from crawlfleet.clock import Clock
from crawlfleet.counters import Counters, Limit, dropped_counter, merge
from crawlfleet.errors import ConfigError, FetchError, LoginFailed
from crawlfleet.events import (
    DomainBlocked,
    EventBus,
    ParseFailed,
    ParserDrifted,
    RequestSkipped,
)
from crawlfleet.fetchers.hooks import Dropped
from crawlfleet.fetchers.protocols import Fetcher
from crawlfleet.frontier.drift import DriftPage
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.ladder import BROWSER
from crawlfleet.frontier.robots import RobotsCache
from crawlfleet.frontier.scope import Refusal
from crawlfleet.frontier.sitemap_format import BadSitemap, SitemapTooLarge
from crawlfleet.frontier.sitemaps import sitemap_depth
from crawlfleet.frontier.store_types import Report, Signal, Visit
from crawlfleet.models import FetchResult, Lease
from crawlfleet.monitoring.samples import MismatchSamples
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.expect import reason_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.records import Outcome
from crawlfleet.runtime.admission import Admitter
from crawlfleet.runtime.choice.strategy import Strategies, fetcher_kind
from crawlfleet.runtime.step.attempts import (
    Step,
    announce,
    attempt_of,
    drift_page,
    item_counters,
    limits_note,
    quality_counters,
)
from crawlfleet.runtime.step.body_bytes import BodyBytes, StepBody
from crawlfleet.runtime.step.drift import DriftWatch
from crawlfleet.runtime.step.freshness import GONE_STATUSES, NOT_MODIFIED, Freshness, conditional
from crawlfleet.runtime.step.judge import (
    RETRIED_REFUSALS,
    StatusClass,
    classify,
    judge,
    retry_after_block,
    told_domain,
)
from crawlfleet.urls import join


@dataclass(frozen=True, slots=True)
class CrawlerParts:
    """The collaborators of a crawl step, built once by ``runtime.wiring``.

    ``fetchers`` holds one fetcher per kind this process serves; a request of another kind is
    a bug of the claim (``ClaimLoop`` claims only these kinds). ``max_step_s`` bounds one
    step (the ``ClaimLoop``'s watchdog). ``freshness`` sends a known URL's validators and
    remembers each visit (``runtime/step/freshness.py``). ``strategies``: the domains' strategy
    slots, which may fetch an ``http`` request with the ``impersonate`` or the ``browser``
    fetcher (None: every request is fetched with its own kind). ``body_bytes``: the bodies
    this process's steps hold, which the claim loop keeps within its budget (0048).
    ``drift``: the drift tests of parsers with expectations and their circuit breaker (None:
    not watched); ``samples`` keeps a mismatched page per (parser, reason) (None: none kept).
    """

    frontier: Frontier
    admitter: Admitter
    fetchers: Mapping[str, Fetcher]
    robots: RobotsCache | None
    parsers: ParserRegistry
    pipeline: Pipeline
    events: EventBus
    clock: Clock
    worker: str
    max_retry_after_s: float
    parse_budget: ParseBudget
    freshness: Freshness
    max_step_s: float
    strategies: Strategies | None = None
    body_bytes: BodyBytes = field(default_factory=BodyBytes)
    drift: DriftWatch | None = None
    samples: MismatchSamples | None = None


class Crawler:
    """Runs crawl steps; holds no state of its own between them."""

    def __init__(self, parts: CrawlerParts) -> None:
        self.parts = parts

    @property
    def kinds(self) -> frozenset[str]:
        """The fetcher kinds this process can serve."""
        return frozenset(self.parts.fetchers)

    async def process(self, lease: Lease) -> None:
        """One crawl step. Never raises for a page-level problem: it is recorded instead.

        A hook's ``Dropped`` skips the page and a ``LoginFailed`` fails it, both with their
        reason and at once (neither is retried nor dead-lettered). An HTTP-lane request of a
        domain whose strategy says ``browser`` is fetched by this process's browser, or
        handed to the browser lane when it has none (``runtime/choice/strategy.py``).

        Raises ``ConfigError`` for a request whose fetcher kind this process has no fetcher
        for (the claim should never have handed it out here).
        """
        with self.parts.body_bytes.step() as body:
            await self._process(lease, body)

    async def _process(self, lease: Lease, body: StepBody) -> None:
        p = self.parts
        request = lease.request
        if sitemap_depth(request.data) is not None:
            await self._sitemap(lease)
            return
        kind = request.fetcher
        if p.strategies is not None and kind == "http":
            kind = fetcher_kind(kind, await p.strategies.of(request.domain), p.fetchers)
        fetcher = p.fetchers.get(kind)
        if fetcher is None and kind == BROWSER and request.fetcher != BROWSER:
            await p.frontier.move(lease, BROWSER)  # a browser worker (or lane) serves it
            return
        if fetcher is None:
            raise ConfigError(
                f"no {request.fetcher!r} fetcher in this process for {request.url} "
                f"(it serves {sorted(p.fetchers)})"
            )
        if await self._paused(lease):
            return
        if not await self._allowed(lease):
            return
        visit = await p.freshness.known(request)
        started = p.clock.now()
        try:
            result = await fetcher.fetch(conditional(request, visit))
        except Dropped as exc:  # a hook's refusal is the page's outcome, not a fault
            await self._skip(lease, str(exc))
            return
        except LoginFailed as exc:
            await self._complete(Step(lease, started, kind=kind), Outcome.FAILED, str(exc))
            return
        except FetchError as exc:
            step = Step(lease, started, route=exc.route, kind=kind, screenshot=exc.screenshot)
            await self._fail(step, str(exc), retry=exc.transient)
            return
        body.fetched(len(result.body))
        signal, why = judge(result)
        step = Step(lease, started, result, signal, why, kind=kind, visit=visit)
        await self._fetched(step, result)

    async def _paused(self, lease: Lease) -> bool:
        """Bury, unfetched, a request whose (parser, domain) a drift paused; whether it was."""
        p = self.parts
        request = lease.request
        if p.drift is None or not p.drift.pauses or not p.parsers.expecting:
            return False
        spec = p.parsers.match(request.url)
        if spec is None or spec.expect is None:
            return False
        if not await p.drift.paused(spec.name, request.domain):
            return False
        error = (
            f"mismatch: {spec.name}: paused by drift on {request.domain} "
            f"(crawlfleet resume-parser {spec.name} {request.domain})"
        )
        await self._fail(Step(lease, p.clock.now()), error, retry=False)
        return True

    async def _allowed(self, lease: Lease) -> bool:
        """Whether robots.txt lets the request be fetched; if not, its lease is ended."""
        p = self.parts
        request = lease.request
        if p.robots is None or request.fetcher == "file":
            return True
        decision = await p.robots.check(request.url)
        if decision.unavailable:
            step = Step(lease, p.clock.now())
            await self._fail(step, decision.reason or "", retry=decision.transient)
        elif not decision.allowed:
            await self._skip(lease, decision.reason or "disallowed by robots.txt")
        return decision.allowed and not decision.unavailable

    async def _sitemap(self, lease: Lease) -> None:
        """A sitemap request's step: fetched by the side fetch (redirects followed), then
        judged, retried, failed and revisited like a page; read instead of parsed."""
        p = self.parts
        if not await self._allowed(lease):
            return
        visit = await p.freshness.known(lease.request)
        started = p.clock.now()
        try:
            result = await p.admitter.fetch_sitemap(lease.request.url)
        except FetchError as exc:
            await self._fail(Step(lease, started, route=exc.route), str(exc), retry=exc.transient)
            return
        signal, why = judge(result)
        await self._fetched(Step(lease, started, result, signal, why, visit=visit), result)

    async def _read_sitemap(self, step: Step, result: FetchResult) -> None:
        """Admit a sitemap's pages and queue its child sitemaps (``Admitter.read_sitemap``);
        its counters are ``sitemaps.*``."""
        p = self.parts
        request = step.lease.request
        try:
            tally = await p.admitter.read_sitemap(request, result.body)
        except BadSitemap as exc:  # too large: a limit's drop (sitemap_max_bytes), not a fault
            too_large = isinstance(exc, SitemapTooLarge)
            counted = dropped_counter(Limit.SITEMAP_MAX_BYTES) if too_large else "sitemaps.skipped"
            counters = {counted: 1.0}
            await self._complete(step, Outcome.FAILED, f"sitemap: {exc}", counters=counters)
            return
        known = p.freshness.next_visit(request, result, None, None)
        await self._complete(step, Outcome.OK, None, counters=tally.counters(), visit=known)

    async def abandon(self, lease: Lease, started: float, error: str) -> None:
        """Record a step stopped from outside (the watchdog): retried later, or buried."""
        await self._fail(Step(lease, started), error)

    async def _fetched(self, step: Step, result: FetchResult) -> None:
        """Retry, follow or parse a response that ``judge`` has read (``step.signal``)."""
        p = self.parts
        lease = step.lease
        visit = step.visit
        if p.freshness.unchanged(result, visit):
            await self._unchanged(step, result)
            return
        if result.status == NOT_MODIFIED:  # never parsed: there is no page in a 304
            await self._complete(step, Outcome.FAILED, "HTTP 304 to a request without validators")
            return
        kind = classify(result)
        if kind is StatusClass.RETRY_AFTER:
            now = p.clock.now()
            wait_s, reason = retry_after_block(
                result.status,
                result.headers.get("retry-after"),
                now,
                max_s=p.max_retry_after_s,
            )
            until = now + wait_s
            p.events.emit(DomainBlocked(lease.request.domain, until, reason))
            await self._fail(
                replace(step, reason=reason),
                reason,
                not_before=until,
                block_until=until,
            )
            return
        if step.signal is Signal.BLOCK:
            await self._fail(step, f"blocked: {step.reason}")
            return
        if step.signal is Signal.REFUSED and result.status in RETRIED_REFUSALS:
            await self._fail(step, f"refused: {step.reason}")  # this URL only (decision 0044)
            return
        if kind is StatusClass.TRANSIENT:
            await self._fail(step, f"HTTP {result.status}")
            return
        if kind is StatusClass.FINAL:
            gone = visit is not None and result.status in GONE_STATUSES
            if gone:
                await p.pipeline.gone(lease.request.url)
            again = None if gone else p.freshness.again(visit)
            await self._complete(step, Outcome.FAILED, f"HTTP {result.status}", visit=again)
            return
        if kind is StatusClass.REDIRECT:
            await self._redirected(step, result)
            return
        if sitemap_depth(lease.request.data) is not None:
            await self._read_sitemap(step, result)
            return
        await self._parsed(step, result)

    async def _parsed(self, step: Step, result: FetchResult) -> None:
        p = self.parts
        request = step.lease.request
        name, parser = p.parsers.select(result.final_url)
        try:
            # The parser reads the request's context from the result, whatever the fetcher.
            if result.request is not request:
                result = replace(result, request=request)
            parsed, cut = await p.parse_budget.parse(parser, result)
        except Exception as exc:  # a parser's bug, or ParseBudgetExceeded: the page's own outcome
            error = f"{type(exc).__name__}: {exc}"
            detail = traceback.format_exc()
            p.events.emit(ParseFailed(request.url, name, error, detail))
            await self._complete(
                step,
                Outcome.PARSE_ERROR,
                f"parser {name!r}: {error}",
                detail=detail,
                visit=p.freshness.again(step.visit),
            )
            return
        expect = p.parsers.expectation(name)
        quality: Counters = {}
        if expect is not None and request.attempt == 0:
            quality = quality_counters(name, expect, parsed)
            await self._watch(name, request.domain, drift_page(expect, parsed))
        if parsed.unmet:
            await self._mismatch(step, name, parsed.unmet, result, quality)
            return
        _, refused = await p.admitter.admit(parsed.links, request)
        outcome = await p.pipeline.process(
            parsed.items, request.domain, fetched_at=result.fetched_at, page=request.url
        )
        counters = item_counters(outcome)
        merge(counters, refused)
        merge(counters, quality)
        if cut:
            counters[dropped_counter(Limit.MAX_LINKS_PER_PAGE)] = cut
        if step.visit is not None:
            counters["fresh.changed"] = 1
        known = p.freshness.next_visit(request, result, step.visit, parsed)
        note = limits_note(counters, len(parsed.links) + cut)
        await self._complete(step, Outcome.OK, None, detail=note, counters=counters, visit=known)

    async def _watch(self, parser: str, domain: str, page: DriftPage) -> None:
        """Feed the pair's drift test; announce its firing."""
        p = self.parts
        if p.drift is None:
            return
        fired = await p.drift.observe(parser, domain, page)
        if fired is not None:
            p.events.emit(ParserDrifted(parser, domain, fired.pages, p.drift.pauses))

    async def _mismatch(
        self,
        step: Step,
        parser: str,
        missing: tuple[str, ...],
        result: FetchResult,
        counters: Counters,
    ) -> None:
        """A page that missed its parser's expectations: kept as a sample, items and links
        dropped, retried, then dead-lettered as ``mismatch: <parser>``."""
        p = self.parts
        if p.samples is not None:
            p.samples.keep(parser, [reason_of(part) for part in missing], missing, result)
        error = f"mismatch: {parser}: missing {'; '.join(missing)}"
        await self._fail(step, error, outcome=Outcome.MISMATCH, counters=counters)

    async def _unchanged(self, step: Step, result: FetchResult) -> None:
        """A revisit found the page as it was: no parse; its items (if any) are seen again."""
        p = self.parts
        request = step.lease.request
        if step.visit is not None and step.visit.item_types:
            await p.pipeline.unchanged(request.url)
        counters = {"fresh.unchanged": 1.0}
        if result.status == NOT_MODIFIED:
            counters["fresh.not_modified"] = 1.0
        known = p.freshness.next_visit(request, result, step.visit, None)
        await self._complete(step, Outcome.OK, None, counters=counters, visit=known)

    async def _redirected(self, step: Step, result: FetchResult) -> None:
        """Queue the Location like a link: the seen filter makes its page fetched once."""
        p = self.parts
        location = join(result.final_url, result.headers["location"])
        if location is None:
            bad = result.headers["location"]
            await self._complete(step, Outcome.FAILED, f"bad redirect Location {bad!r}")
            return
        target = p.frontier.redirect(step.lease.request, location)
        if isinstance(target, Refusal):
            counters = {dropped_counter(target.reason): 1.0}
            await self._complete(step, Outcome.FAILED, target.text, counters=counters)
            return
        await p.admitter.add([target])
        await self._complete(step, Outcome.OK, None)

    async def _skip(self, lease: Lease, reason: str) -> None:
        request = lease.request
        self.parts.events.emit(RequestSkipped(request.url, request.domain, reason))
        await self._complete(Step(lease, self.parts.clock.now()), Outcome.SKIPPED, reason)

    async def _complete(
        self,
        step: Step,
        outcome: Outcome,
        error: str | None,
        *,
        detail: str | None = None,
        counters: Mapping[str, float] | None = None,
        visit: Visit | None = None,
    ) -> None:
        p = self.parts
        attempt = attempt_of(step, outcome, error, detail, p.worker, p.clock.now())
        signal, reason = told(step)
        report = Report(attempt, signal, reason, counters or {}, visit=visit)
        announce(attempt, await p.frontier.complete(step.lease, report), p.events, p.strategies)

    async def _fail(
        self,
        step: Step,
        error: str,
        *,
        retry: bool = True,
        not_before: float = 0.0,
        block_until: float = 0.0,
        outcome: Outcome | None = None,
        counters: Mapping[str, float] | None = None,
    ) -> None:
        """Retry the request later or bury it; only this request waits (unless ``block_until``).

        ``outcome`` is recorded whether retried or buried (None: ``retry`` or ``dead``).
        """
        p = self.parts
        attempt = attempt_of(step, Outcome.RETRY, error, None, p.worker, p.clock.now())
        signal, reason = told(step)
        report = Report(attempt, signal, reason, counters or {}, block_until=block_until)
        retried, ended = await p.frontier.fail(
            step.lease,
            error,
            attempt.at,
            report,
            not_before=not_before,
            retry=retry,
            outcome=outcome,
        )
        ended_as = outcome or (Outcome.RETRY if retried else Outcome.DEAD)
        announce(replace(attempt, outcome=ended_as), ended, p.events, p.strategies)


def told(step: Step) -> tuple[Signal, str]:
    """The signal and reason a step's report gives its domain (``judge.told_domain``)."""
    return told_domain(step.signal, step.reason, succeeded_before=step.visit is not None)
