"""Running a crawl's parsers again over its archive (``crawlfleet reparse``): no request made.

Each archived page (a ``response`` record of a crawl step; not a robots.txt or sitemap read,
not a ``revisit``, whose page an earlier record holds) becomes the ``FetchResult`` the crawl
had: the same URL, status, headers, body (content codings undone, as the fetcher did),
fetch time and parser context. A page the crawl step would parse (a 2xx not judged a block)
goes through the crawl's parsers, within its parse budget, and its items through the crawl's
pipeline (processors, validation, dedupe) into ``sink``. Links found are counted, never
crawled.

With ``jobs`` above 1 the parsers run in that many processes (``_ParseProcesses``), pages
handed over in batches and their items taken back in the archive's order, while this process
reads the records and runs the pipeline: a reparse is bound by the parse, which one core
runs at about the crawl's own pages/s (decision 0049).

``resume_reparsing`` is ``resume-parser --parsers``: after a drift, an embedded crawl's
mismatched pages parsed again from its archive with the fixed parsers, through the crawl
step's own wiring (pipeline, admission of links), instead of fetched again.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time
from collections import Counter, deque
from collections.abc import Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from crawlfleet.archive.index import INDEX_FILE, SqliteCaptureIndex
from crawlfleet.archive.protocols import Archived, CaptureIndex
from crawlfleet.clock import SystemClock
from crawlfleet.errors import ConfigError, FetchError, StateError
from crawlfleet.events import EventBus
from crawlfleet.fetchers.decoding import decode_body
from crawlfleet.frontier.drift_marks import drifts
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.protocols import QueueStore
from crawlfleet.frontier.store_types import Signal
from crawlfleet.models import CrawlRequest, FetchResult, Item
from crawlfleet.monitoring.deadletters import letter_class
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.pipeline.pipeline import Pipeline
from crawlfleet.pipeline.protocols import Sink
from crawlfleet.pipeline.rejects import RejectStore
from crawlfleet.records import DeadLetter
from crawlfleet.runtime.backends import open_embedded
from crawlfleet.runtime.choice.routing import Router
from crawlfleet.runtime.options import parse_limits
from crawlfleet.runtime.policies import domain_policy
from crawlfleet.runtime.step.attempts import item_counters
from crawlfleet.runtime.step.drift import resume
from crawlfleet.runtime.step.judge import StatusClass, classify, judge
from crawlfleet.runtime.wiring import build_admitter, build_frontier, crawl_parsers, crawl_pipeline
from crawlfleet.settings import Settings
from crawlfleet.statedir import IDENTITY_SETTINGS, recorded_identity, recorded_politeness
from crawlfleet.urls import UrlRules, fingerprint

DEAD_PAGE = 500  # dead letters read a page at a time


@dataclass(slots=True)
class ReparseFigures:
    """What a reparse did: records read, pages parsed, items by fate, links found, and the
    records not parsed by reason (``revisit``, ``side fetch``, ``damaged record``,
    ``HTTP 404``, ``parse error``)."""

    records: int = 0
    pages: int = 0
    items: Counter[str] = field(default_factory=Counter)
    links: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    first_error: str | None = None
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    startup_s: float = 0.0
    """Wall seconds the parse processes took to start, before ``elapsed_s`` began."""

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data (a distributed reparse's task result)."""
        return {
            "records": self.records,
            "pages": self.pages,
            "items": dict(self.items),
            "links": self.links,
            "skipped": dict(self.skipped),
            "first_error": self.first_error,
            "elapsed_s": self.elapsed_s,
            "cpu_s": self.cpu_s,
            "startup_s": self.startup_s,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReparseFigures:
        return cls(
            records=int(data["records"]),
            pages=int(data["pages"]),
            items=Counter({str(k): int(v) for k, v in data["items"].items()}),
            links=int(data["links"]),
            skipped=Counter({str(k): int(v) for k, v in data["skipped"].items()}),
            first_error=data.get("first_error"),
            elapsed_s=float(data["elapsed_s"]),
            cpu_s=float(data["cpu_s"]),
            startup_s=float(data.get("startup_s", 0.0)),
        )

    def add(self, other: ReparseFigures) -> None:
        """Count ``other``'s records, pages, items, links and skips in too (CPU summed, the
        elapsed time left to the caller, the first error kept)."""
        self.records += other.records
        self.pages += other.pages
        self.items.update(other.items)
        self.links += other.links
        self.skipped.update(other.skipped)
        self.first_error = self.first_error or other.first_error
        self.cpu_s += other.cpu_s


def archived_result(archived: Archived, rules: UrlRules, *, cap_bytes: int) -> FetchResult:
    """The ``FetchResult`` the crawl step had for ``archived``.

    Raises ``FetchError`` for a body whose content coding cannot be undone within ``cap_bytes``.
    """
    url = archived.url
    request = CrawlRequest(
        url=url,
        fingerprint=fingerprint(url),
        domain=rules.politeness_key(url),
        data=archived.context,
    )
    body = archived.body
    if coding := archived.headers.get("content-encoding"):
        body = decode_body(body, coding, cap_bytes=cap_bytes, url=url)
    return FetchResult(
        url=url,
        final_url=url,
        status=archived.status,
        headers=archived.headers,
        body=body,
        elapsed_s=0.0,
        fetched_at=archived.at,
        request=request,
    )


PARSE_BATCH_PAGES = 32
"""Pages handed to a parse process at once: one pickling round trip for them all."""


async def reparse(
    settings: Settings,
    records: Iterable[Archived],
    sink: Sink,
    rejects: RejectStore | None,
    *,
    jobs: int = 1,
) -> ReparseFigures:
    """Parse every page of ``records`` with ``settings``' parsers into ``sink``, in ``jobs``
    processes (1: in this one). The figures' time starts once the processes are ready (their
    start, 0.4-0.5 s, is ``startup_s``: a third of a 4,000-page reparse's wall time when it
    was counted in)."""
    figures = ReparseFigures()
    processes = None
    if jobs > 1:
        starting = time.perf_counter()
        processes = _ParseProcesses(settings, jobs)
        try:
            await processes.started()
        except BaseException:
            processes.close()
            raise
        figures.startup_s = time.perf_counter() - starting
    started, started_cpu = time.perf_counter(), time.process_time()
    registry = crawl_parsers(settings)
    pipeline = crawl_pipeline(
        settings, registry, sink, events=EventBus(), clock=SystemClock(), rejects=rejects
    )
    budget = ParseBudget(parse_limits(settings))
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    batch: list[FetchResult] = []
    try:
        for archived in records:
            figures.records += 1
            result = _not_a_page(archived) or _page(archived, rules, settings, figures)
            if isinstance(result, str):
                figures.skipped[result] += 1
            elif processes is None:
                parsed = await _parse_here(result, registry, budget)
                await _store(result, parsed, pipeline, figures)
            else:
                batch.append(result)
                if len(batch) == PARSE_BATCH_PAGES:
                    for page, parsed in await processes.parse(batch):
                        await _store(page, parsed, pipeline, figures)
                    batch = []
        if processes is not None:
            for page, parsed in await processes.parse(batch, last=True):
                await _store(page, parsed, pipeline, figures)
    finally:
        budget.close()
        if processes is not None:
            processes.close()
    figures.elapsed_s = time.perf_counter() - started
    figures.cpu_s = time.process_time() - started_cpu + (processes.cpu_s if processes else 0.0)
    return figures


_Parsed = tuple[list[Item], int] | str
"""A page's items and how many links it had, or why it was not parsed (a parser's error)."""


class _ParseProcesses:
    """``jobs`` processes running the crawl's parsers over batches of pages, in order.

    Up to two batches a process are in flight; ``parse`` hands one over and returns the
    pages of the oldest batch once more are waiting (``last``: every batch left); a process
    that dies (a parser exiting the interpreter) is a ``StateError`` naming the batch. The
    processes are forked from a fresh interpreter that imported this module (forkserver:
    nothing of this process's threads, loop or open files) and load the parsers themselves.
    """

    def __init__(self, settings: Settings, jobs: int) -> None:
        self._jobs = jobs
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])  # imported once, by the server
        self._pool = ProcessPoolExecutor(
            jobs,
            mp_context=context,
            initializer=_start_parse_process,
            initargs=(settings,),
        )
        self._pending: deque[tuple[list[FetchResult], Future[tuple[list[_Parsed], float]]]] = (
            deque()
        )
        self.cpu_s = 0.0
        """CPU seconds the processes spent on the batches returned so far."""

    async def started(self) -> None:
        """Wait until every process is up with its parsers loaded (a pool starts its
        processes one a task submitted, each then importing the parsers): tasks that each
        hold a process for a moment until ``jobs`` distinct ones have answered, at most
        ``_START_ROUNDS`` rounds (a slower process is then waited for by the first batch)."""
        answered: set[int] = set()
        for _ in range(_START_ROUNDS):
            tasks = [self._pool.submit(_process_id) for _ in range(self._jobs)]
            try:
                answered.update(await asyncio.gather(*map(asyncio.wrap_future, tasks)))
            except BrokenProcessPool:
                raise StateError("a parse process died while loading the parsers") from None
            if len(answered) >= self._jobs:
                return

    async def parse(
        self, batch: list[FetchResult], *, last: bool = False
    ) -> list[tuple[FetchResult, _Parsed]]:
        if batch:
            self._pending.append((batch, self._pool.submit(_parse_batch, batch)))
        done: list[tuple[FetchResult, _Parsed]] = []
        while self._pending and (last or len(self._pending) > 2 * self._jobs):
            pages, future = self._pending.popleft()
            try:
                parsed, cpu_s = await asyncio.wrap_future(future)
            except BrokenProcessPool:
                raise StateError(
                    f"a parse process died while parsing {pages[0].url} or one of the "
                    f"{len(pages) - 1} pages after it (a parser that exits or crashes the "
                    "interpreter); --jobs 1 parses in this process"
                ) from None
            self.cpu_s += cpu_s
            done.extend(zip(pages, parsed, strict=True))
        return done

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


_START_ROUNDS = 20


def _process_id() -> int:
    time.sleep(0.02)  # held: the next task goes to another process
    return os.getpid()


_PROCESS_PARSERS: list[tuple[ParserRegistry, ParseBudget]] = []
"""A parse process's registry and budget (``_start_parse_process``)."""


def _start_parse_process(settings: Settings) -> None:
    _PROCESS_PARSERS.append(
        (crawl_parsers(settings), ParseBudget(parse_limits(settings), threads=1))
    )


def _parse_batch(pages: list[FetchResult]) -> tuple[list[_Parsed], float]:
    """The pages parsed, and the CPU seconds it took."""
    started = time.process_time()
    registry, budget = _PROCESS_PARSERS[0]
    parsed = [_parse_page(page, registry, budget) for page in pages]
    return parsed, time.process_time() - started


def _parse_page(result: FetchResult, registry: ParserRegistry, budget: ParseBudget) -> _Parsed:
    name, parser = registry.select(result.final_url)
    try:
        parsed, _links_cut = budget.parse_here(parser, result)
    except Exception as exc:  # a parser's bug: the page's own outcome, as in a crawl
        return f"{result.url}: parser {name!r}: {exc}"
    return parsed.items, len(parsed.links)


async def reparse_to_postgres(
    settings: Settings, records: Iterable[Archived], dsn: str, *, jobs: int = 1
) -> ReparseFigures:
    """``reparse`` into a distributed crawl's items (PostgreSQL, the crawl id's rows, upserted
    by item key), as its workers write them; the schema must be migrated."""
    from crawlfleet.pipeline.sinks.postgres import PostgresRejects, PostgresSink

    sink = await PostgresSink.open(dsn, crawl_id=settings.crawl_id)
    try:
        rejects = await PostgresRejects.open(dsn, crawl_id=settings.crawl_id)
        try:
            return await reparse(settings, records, sink, rejects, jobs=jobs)
        finally:
            await rejects.close()
    finally:
        await sink.close()


def _not_a_page(archived: Archived) -> str | None:
    if archived.kind == "revisit":
        return "revisit"
    if archived.kind != "response":
        return f"{archived.kind} record"
    if not archived.page:
        return "side fetch"
    return None


def _page(
    archived: Archived, rules: UrlRules, settings: Settings, figures: ReparseFigures
) -> FetchResult | str:
    """The page the crawl step would parse, or why it would not."""
    try:
        result = archived_result(archived, rules, cap_bytes=settings.max_decompressed_bytes)
    except FetchError as exc:
        figures.first_error = figures.first_error or str(exc)
        return "undecodable body"
    if classify(result) is not StatusClass.OK:
        return f"HTTP {result.status}"
    if judge(result)[0] is Signal.BLOCK:
        return "block page"
    return result


async def _parse_here(
    result: FetchResult, registry: ParserRegistry, budget: ParseBudget
) -> _Parsed:
    name, parser = registry.select(result.final_url)
    try:
        parsed, _links_cut = await budget.parse(parser, result)
    except Exception as exc:  # a parser's bug: the page's own outcome, as in a crawl
        return f"{result.url}: parser {name!r}: {exc}"
    return parsed.items, len(parsed.links)


async def _store(
    result: FetchResult, parsed: _Parsed, pipeline: Pipeline, figures: ReparseFigures
) -> None:
    """The page's items through the pipeline, counted."""
    if isinstance(parsed, str):
        figures.first_error = figures.first_error or parsed
        figures.skipped["parse error"] += 1
        return
    items, links = parsed
    assert result.request is not None
    outcome = await pipeline.process(
        items, result.request.domain, fetched_at=result.fetched_at, page=result.url
    )
    figures.pages += 1
    figures.links += links
    figures.items["stored"] += outcome.stored
    figures.items["invalid"] += outcome.invalid
    figures.items["dropped"] += sum(outcome.dropped.values())
    return None


@dataclass(frozen=True, slots=True)
class ReparsedResume:
    """What a reparsing resume did: pages parsed from their capture (and the items they
    stored), and pages requeued to be fetched again."""

    reparsed: int
    items: int
    requeued: int


@dataclass(frozen=True, slots=True)
class ReparseTarget:
    """A crawl to resume by reparsing: its settings (with the fixed parsers), seeds, store,
    item sink and rejects, and its archive (capture index and root)."""

    settings: Settings
    seeds: list[str]
    store: QueueStore
    sink: Sink
    rejects: RejectStore | None
    index: CaptureIndex


async def resume_reparsing(settings: Settings, parser: str, domain: str) -> ReparsedResume:
    """``reparse_mismatched`` for the embedded crawl of ``settings.state_dir``, with
    ``settings``' (fixed) parsers. ``StateError`` when the crawl is running (its state
    directory is locked) or kept no archive."""
    identity = recorded_identity(settings.state_dir)
    seeds = [str(seed) for seed in identity["seeds"]]
    recorded = {name: identity[name] for name in IDENTITY_SETTINGS if name in identity}
    # the crawl's own politeness too: opening the state directory records it again
    recorded |= recorded_politeness(settings.state_dir)
    settings = settings.model_copy(update=recorded)
    async with AsyncExitStack() as stack:
        index = SqliteCaptureIndex.existing(settings.state_dir / INDEX_FILE)
        stack.callback(index.close)
        backends = await open_embedded(
            settings, stack, policy=domain_policy(settings), seeds=seeds, fresh=False
        )
        assert backends.sink is not None  # an embedded crawl's items file
        target = ReparseTarget(
            settings, seeds, backends.store, backends.sink, backends.rejects, index
        )
        return await reparse_mismatched(target, parser, domain, stack)


async def reparse_mismatched(
    target: ReparseTarget, parser: str, domain: str, stack: AsyncExitStack
) -> ReparsedResume:
    """Re-open ``parser`` on ``domain`` after a drift, parsing its mismatched pages from the
    crawl's archive with the target's (fixed) parsers instead of fetching them again.

    Each ``mismatch: <parser>`` dead letter of ``domain`` with an archived response goes
    through the crawl step's parse as if just fetched (its request's context and depth):
    items through the crawl's pipeline into its sink (counted in its statistics), links
    offered to its frontier (scope and robots.txt as in the crawl); it then leaves the DLQ
    (it stays seen). A page without a capture (the breaker buried it unfetched), or that
    still misses its expectations, is requeued as ``resume`` does; the drift mark is cleared.
    ``ConfigError`` when no drift of ``parser`` on ``domain``; ``StateError`` when the
    archive index names no archive.
    """
    from crawlfleet.archive.reading import read_capture  # fastwarc: the archive extra

    settings, index = target.settings, target.index
    root = index.root
    if root is None:
        raise StateError("the crawl's archive index names no archive (no page was kept)")
    clock, events = SystemClock(), EventBus()
    registry = crawl_parsers(settings)
    router = Router(registry, settings.domains, settings.browser_wait)
    frontier = build_frontier(settings, target.store, target.seeds, router)
    marks = drifts(await frontier.strategy(domain))
    if parser not in marks:
        known = ", ".join(f"{p} ({m})" for p, m in sorted(marks.items())) or "none"
        raise ConfigError(f"no drift of parser {parser!r} on {domain!r} (there: {known})")
    admitter = await build_admitter(settings, frontier, events=events, clock=clock, stack=stack)
    pipeline = crawl_pipeline(
        settings, registry, target.sink, events=events, clock=clock, rejects=target.rejects
    )
    budget = ParseBudget(parse_limits(settings))
    stack.callback(budget.close)
    rules = UrlRules(settings.strip_query_params, settings.politeness_key)
    reparsed: list[str] = []
    items = 0
    for letter in await _letters(frontier, f"mismatch: {parser}", domain):
        request = letter.request
        capture = index.latest(request.url)
        if capture is None:
            continue
        archived = read_capture(root, capture)
        if _not_a_page(archived) is not None:
            continue
        try:
            result = archived_result(archived, rules, cap_bytes=settings.max_decompressed_bytes)
        except FetchError:
            continue
        result = replace(result, request=request)
        if classify(result) is not StatusClass.OK or judge(result)[0] is Signal.BLOCK:
            continue
        try:
            parsed, _cut = await budget.parse(registry.select(result.final_url)[1], result)
        except Exception:  # a parser's bug: the page is fetched and fails in the crawl
            continue
        if parsed.unmet:
            continue
        await admitter.admit(parsed.links, request)
        outcome = await pipeline.process(
            parsed.items, domain, fetched_at=result.fetched_at, page=request.url
        )
        await frontier.add_counters(domain, item_counters(outcome))
        items += outcome.stored
        reparsed.append(request.fingerprint)
    if reparsed:
        await frontier.purge_dead(reparsed)
    requeued = await resume(frontier, parser, domain)
    return ReparsedResume(len(reparsed), items, requeued)


async def _letters(frontier: Frontier, name: str, domain: str) -> list[DeadLetter]:
    """Every dead letter of class ``name`` on ``domain``, read before anything moves."""
    found: list[DeadLetter] = []
    offset = 0
    while True:
        page = await frontier.dead_letters(DEAD_PAGE, offset)
        found += [x for x in page if letter_class(x) == name and x.request.domain == domain]
        if len(page) < DEAD_PAGE:
            return found
        offset += len(page)
