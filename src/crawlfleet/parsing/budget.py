"""Parsing under a budget: a nesting pre-check, a deadline, and large pages off the loop.

Building an HTML tree is quadratic in its nesting depth (lexbor: 10,000 unclosed ``<div>``
0.09 s, 40,000 1.6 s, 100,000 20 s), so a 50 KB gzip page could hold a worker for hours. A
scan of its tags in C (``_nesting.c``, ~15 ns a tag, without the GIL) refuses HTML nested
deeper than ``max_nesting_depth`` before any parse (decision 0063). A page of at most
``INLINE_MAX_BYTES`` is then parsed on the event loop's thread, stopped at ``max_parse_s``
by ``deadline.MAIN_THREAD_DEADLINE`` (decision 0023: handing every page to a thread cost a
third of the crawl's CPU). A larger page, or any page when the loop does not
run on the main thread (or the process handles ``SIGALRM`` itself), is parsed in one of the
budget's threads (lexbor releases the GIL while it builds the tree, so the loop goes on), and
a parse not done within ``max_parse_s`` (waiting for a thread included) fails; a thread
cannot be stopped, so that parse runs on in the background and its result is dropped. Both
failures are ``ParseBudgetExceeded``. Before a thread takes it, a page waits until the pages
parsing there hold few enough bytes (``tree_memory.ParseBytes``, decision 0048: a tree is
10-20 times its page); that wait is not part of ``max_parse_s``.

The links of any parser are capped at ``max_links`` (``max_links_per_page``, 100,000 by
default); the parse says how many it cut, and the crawl counts them
(``dropped.max_links_per_page``). The body's byte limit bounds the links a page can hold
(decision 0043: a 10 MB page of the shortest links holds ~440,000).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, replace

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import DEFAULT_MAX_CONTEXT_BYTES, FetchResult, ParseResult
from crawlfleet.parsing import _nesting
from crawlfleet.parsing.deadline import MAIN_THREAD_DEADLINE, DeadlinePassed
from crawlfleet.parsing.payloads import check_payloads
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.tree_memory import TRIM_AFTER_BYTES, ParseBytes, return_free_heap

# Pages up to this size are parsed on the loop's thread. lexbor builds a 20 KB page's tree in
# ~35 µs and a flat 128 KB one with 2,500 links (and selects them) in ~2.5 ms; above that,
# a parse would hold the loop longer than a thread hop costs (decision 0023).
INLINE_MAX_BYTES = 128 * 1024


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What one page's parse may cost; ``max_links`` caps the links kept from any parser,
    ``max_context_bytes`` the context of each (``parsing.payloads``). Built from the settings
    by ``runtime.options.parse_limits``."""

    max_nesting_depth: int
    max_parse_s: float
    max_links: int
    max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES


def nested_deeper_than(html: bytes, max_depth: int) -> bool:
    """Whether the elements of ``html`` may nest deeper than ``max_depth``, from a scan of
    its tags.

    Each start tag opens an element that the next end tag of its name closes; an end tag
    with no open element of its name is ignored, as a parser does. Void elements and those
    with optional end tags (``p``, ``li``, ``td`` ...) are not counted: the depth found can
    be a few times lower than a parser's for nested tables, never unbounded.
    """
    return _nesting.deepest(html, max_depth) > max_depth


class ParseBudget:
    """Runs parsers within ``ParseLimits``; ``close`` when the crawl ends."""

    def __init__(self, limits: ParseLimits, *, threads: int = 2) -> None:
        self.limits = limits
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="crawlfleet-parse")
        self._parse_bytes = ParseBytes()

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
        size = len(result.body)
        await self._parse_bytes.take(size)  # before the deadline starts (tree_memory.py)
        try:
            done = self._executor.submit(self._parse, parser, result)
        except BaseException:
            self._parse_bytes.give_back(size)
            raise
        # The bytes are given back when the thread is done, even with a parse past its deadline.
        done.add_done_callback(lambda _: _call_soon(loop, self._parse_bytes.give_back, size))
        try:
            async with asyncio.timeout(self.limits.max_parse_s) as deadline:
                return await asyncio.wrap_future(done)
        except TimeoutError:
            if not deadline.expired():
                raise  # the parser's own
            raise self._late(result) from None

    def parse_here(self, parser: Parser, result: FetchResult) -> tuple[ParseResult, int]:
        """``parse`` on the calling thread whatever the page's size, the process's main thread
        (a reparse's parse process, which holds one page at a time); ``RuntimeError`` on
        another thread, where the deadline cannot be kept."""
        if not MAIN_THREAD_DEADLINE.usable():
            raise RuntimeError("parse_here needs the main thread and SIGALRM")
        try:
            return MAIN_THREAD_DEADLINE.run(
                self.limits.max_parse_s, lambda: self._parse(parser, result)
            )
        except DeadlinePassed:
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
        if len(result.body) >= TRIM_AFTER_BYTES:
            return_free_heap()  # the tree is gone; glibc would keep its pages
        check_payloads(parsed.links, limits.max_context_bytes)
        cut = len(parsed.links) - limits.max_links
        if cut > 0:
            return replace(parsed, links=parsed.links[: limits.max_links]), cut
        return parsed, 0

    def close(self) -> None:
        """Drop queued parses; a running one finishes in its thread."""
        self._executor.shutdown(wait=False, cancel_futures=True)


def _call_soon(
    loop: asyncio.AbstractEventLoop, give_back: Callable[[int], None], size: int
) -> None:
    """``give_back(size)`` on ``loop`` from a parse thread; nothing if the loop is closed."""
    with suppress(RuntimeError):  # the loop closed while the parse ran on
        loop.call_soon_threadsafe(give_back, size)
