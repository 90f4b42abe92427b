"""Parsing under a budget: a nesting pre-check, a deadline, and large pages off the loop.

Building an HTML tree is quadratic in its nesting depth (lexbor: 10,000 unclosed ``<div>``
0.09 s, 40,000 1.6 s, 100,000 20 s), so a 50 KB gzip page could hold a worker for hours. A
byte scan refuses HTML nested deeper than ``max_nesting_depth`` before any parse. A page of
at most ``INLINE_MAX_BYTES`` is then parsed on the event loop's thread, stopped at
``max_parse_s`` by ``deadline.MAIN_THREAD_DEADLINE`` (decision 0023: handing every page to a
thread cost a third of the crawl's CPU). A larger page, or any page when the loop does not
run on the main thread (or the process handles ``SIGALRM`` itself), is parsed in one of the
budget's threads (lexbor releases the GIL while it builds the tree, so the loop goes on), and
a parse not done within ``max_parse_s`` (waiting for a thread included) fails; a thread
cannot be stopped, so that parse runs on in the background and its result is dropped. Both
failures are ``ParseBudgetExceeded``.

The links of any parser are capped at ``max_links`` (``max_links_per_page``, 100,000 by
default); the parse says how many it cut, and the crawl counts them
(``dropped.max_links_per_page``). The body's byte limit bounds the links a page can hold
(decision 0043: a 10 MB page of the shortest links holds ~440,000).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import DEFAULT_MAX_CONTEXT_BYTES, FetchResult, ParseResult
from crawlfleet.parsing.deadline import MAIN_THREAD_DEADLINE, DeadlinePassed
from crawlfleet.parsing.payloads import check_payloads
from crawlfleet.parsing.protocols import Parser
from crawlfleet.settings import Settings

# Pages up to this size are parsed on the loop's thread. lexbor builds a 20 KB page's tree in
# ~35 µs and a flat 128 KB one with 2,500 links (and selects them) in ~2.5 ms; above that,
# a parse would hold the loop longer than a thread hop costs (decision 0023).
INLINE_MAX_BYTES = 128 * 1024

_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]*)")
# Elements that never hold others (void) or that close their open sibling (optional end
# tags), so their start tags do not deepen the tree.
_NOT_NESTING = frozenset(
    b"area base br col embed hr img input link meta source track wbr param keygen frame "
    b"basefont bgsound p li dt dd tr td th option optgroup rb rt rp rtc thead tbody tfoot "
    b"colgroup caption html head body".split()
)


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What one page's parse may cost; ``max_links`` caps the links kept from any parser,
    ``max_context_bytes`` the context of each (``parsing.payloads``)."""

    max_nesting_depth: int
    max_parse_s: float
    max_links: int
    max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES

    @classmethod
    def from_settings(cls, settings: Settings) -> ParseLimits:
        return cls(
            max_nesting_depth=settings.max_html_nesting_depth,
            max_parse_s=settings.max_parse_s,
            max_links=settings.max_links_per_page,
            max_context_bytes=settings.max_context_bytes,
        )


def nested_deeper_than(html: bytes, max_depth: int) -> bool:
    """Whether the elements of ``html`` may nest deeper than ``max_depth``, from a byte scan.

    Each start tag opens an element that the next end tag of its name closes; an end tag
    with no open element of its name is ignored, as a parser does. Void elements and those
    with optional end tags (``p``, ``li``, ``td`` ...) are not counted: the depth found can
    be a few times lower than a parser's for nested tables, never unbounded.
    """
    starts = html.count(b"<")  # counting one byte: ~13 µs for a 20 KB page, a pair ~20 µs
    if starts <= max_depth or starts - html.count(b"</") <= max_depth:
        return False  # fewer start tags than the limit
    open_by_name: Counter[bytes] = Counter()
    depth = 0
    for match in _TAG.finditer(html):
        closing, name = match.groups()
        name = name.lower()
        if name in _NOT_NESTING:
            continue
        if not closing:
            open_by_name[name] += 1
            depth += 1
            if depth > max_depth:
                return True
        elif open_by_name[name]:
            open_by_name[name] -= 1
            depth -= 1
    return False


class ParseBudget:
    """Runs parsers within ``ParseLimits``; ``close`` when the crawl ends."""

    def __init__(self, limits: ParseLimits, *, threads: int = 2) -> None:
        self.limits = limits
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="crawlfleet-parse")

    async def parse(self, parser: Parser, result: FetchResult) -> tuple[ParseResult, int]:
        """``parser(result)`` with at most ``max_links`` links, and how many links it cut.

        Raises ``ParseBudgetExceeded`` for HTML nested too deep or a parse past its deadline,
        ``ValueError`` for a link whose context or headers cannot be stored; whatever the
        parser raises is raised as it is.
        """
        if len(result.body) <= INLINE_MAX_BYTES and MAIN_THREAD_DEADLINE.usable():
            try:
                return MAIN_THREAD_DEADLINE.run(
                    self.limits.max_parse_s, lambda: self._parse(parser, result)
                )
            except DeadlinePassed:
                raise self._late(result) from None
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self._executor, self._parse, parser, result)
        try:
            async with asyncio.timeout(self.limits.max_parse_s) as deadline:
                return await work
        except TimeoutError:
            if not deadline.expired():
                raise  # the parser's own
            raise self._late(result) from None

    def _late(self, result: FetchResult) -> ParseBudgetExceeded:
        return ParseBudgetExceeded(
            f"{result.final_url}: parsing took more than {self.limits.max_parse_s:g} s"
        )

    def _parse(self, parser: Parser, result: FetchResult) -> tuple[ParseResult, int]:
        limits = self.limits
        if result.is_html and nested_deeper_than(result.body, limits.max_nesting_depth):
            raise ParseBudgetExceeded(
                f"{result.final_url}: HTML nested deeper than {limits.max_nesting_depth} elements"
            )
        parsed = parser(result)
        check_payloads(parsed.links, limits.max_context_bytes)
        cut = len(parsed.links) - limits.max_links
        if cut > 0:
            return replace(parsed, links=parsed.links[: limits.max_links]), cut
        return parsed, 0

    def close(self) -> None:
        """Drop queued parses; a running one finishes in its thread."""
        self._executor.shutdown(wait=False, cancel_futures=True)
