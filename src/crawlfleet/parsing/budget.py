"""Parsing under a budget: a nesting pre-check, a deadline, and large pages off the loop.

Building an HTML tree is quadratic in its nesting depth (lexbor: 10,000 unclosed ``<div>``
0.09 s, 40,000 1.6 s, 100,000 20 s), so a 50 KB gzip page could hold a worker for hours. A
byte scan refuses HTML nested deeper than ``max_nesting_depth`` before any parse, mostly at
the regular-expression engine's speed (decision 0047). A page of
at most ``INLINE_MAX_BYTES`` is then parsed on the event loop's thread, stopped at
``max_parse_s`` by ``deadline.MAIN_THREAD_DEADLINE`` (decision 0023: handing every page to a
thread cost a third of the crawl's CPU). A larger page, or any page when the loop does not
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
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, replace

from crawlfleet.errors import ParseBudgetExceeded
from crawlfleet.models import DEFAULT_MAX_CONTEXT_BYTES, FetchResult, ParseResult
from crawlfleet.parsing.deadline import MAIN_THREAD_DEADLINE, DeadlinePassed
from crawlfleet.parsing.payloads import check_payloads
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.tree_memory import TRIM_AFTER_BYTES, ParseBytes, return_free_heap

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
# An element closed by the next tag of the same name, holding only text and elements of the
# same shape, up to this many levels deep: ``<li><a href=x><code>f</code></a></li>`` is one.
# Each such run leaves the tag scan's state as it found it (its end tags close what its
# start tags opened), so cutting it out lowers the depth found by at most this much.
_RUN_LEVELS = 6


def _closed_run(level: int) -> str:
    inner = f"(?:{_closed_run(level + 1)}[^<]*+)*+" if level < _RUN_LEVELS else ""
    return rf"<([A-Za-z][A-Za-z0-9-]*+)[^<]*+{inner}</\{level}(?![A-Za-z0-9-])"


_CLOSED_RUN = re.compile(_closed_run(1).encode())
# One re.sub call holds the GIL throughout: runs are cut this many bytes at a time.
_PIECE_BYTES = 256 * 1024
# Real pages spend more bytes than this on a tag: a page shorter than the limit times this
# is first bounded by counting its start tags, a longer one goes straight to the runs
# (32 to 64 measured over the three corpora of decision 0059; 48 the cheapest).
_BYTES_PER_TAG = 48


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
    """Whether the elements of ``html`` may nest deeper than ``max_depth``, from a byte scan.

    Each start tag opens an element that the next end tag of its name closes; an end tag
    with no open element of its name is ignored, as a parser does. Void elements and those
    with optional end tags (``p``, ``li``, ``td`` ...) are not counted: the depth found can
    be a few times lower than a parser's for nested tables, never unbounded.

    The answer is that of scanning every tag; most tags are first cut out in closed runs
    (``_CLOSED_RUN``, replaced by a space so no new tag forms), and the tags left decide it
    unless they come within ``_RUN_LEVELS`` of the limit.
    """
    if (
        len(html) <= _BYTES_PER_TAG * max_depth
        and _start_tags_at_most(html, max_depth) <= max_depth
    ):
        return False
    rest = _cut_closed_runs(html)
    if _start_tags_at_most(rest, max_depth - _RUN_LEVELS) + _RUN_LEVELS <= max_depth:
        return False
    depth = _deepest(rest, max_depth)
    if depth > max_depth:
        return True  # what was cut out left the depth around it as it was
    if depth + _RUN_LEVELS <= max_depth:
        return False
    return _deepest(html, max_depth) > max_depth


def _cut_closed_runs(html: bytes) -> bytes:
    """``html`` with its closed runs replaced by a space, a piece at a time.

    One ``re.sub`` holds the GIL throughout (~3 ns a byte): in pieces of about
    ``_PIECE_BYTES``, a parse thread lets the event loop in between them. Each piece ends
    before a ``<``, so no tag is split; a run across two pieces is left whole, as if uncut.
    """
    pieces: list[bytes] = []
    start = 0
    while start < len(html):
        end = html.find(b"<", start + _PIECE_BYTES)
        end = len(html) if end < 0 else end
        pieces.append(_CLOSED_RUN.sub(b" ", html[start:end]))
        start = end
    return b"".join(pieces)


def _start_tags_at_most(html: bytes, enough: int) -> int:
    """A bound on the start tags of ``html`` from counting bytes, at C speed.

    Each tag the scan counts begins with a ``<``, a start tag with one that no ``/``
    follows. The ``<`` alone (~0.35 ns a byte) bound it when that is ``enough``; otherwise
    the ``</`` are taken off (~0.75 ns a byte more). No count of end tags can bound the depth
    itself: an end tag closes nothing unless its name is open (``<div></span>`` repeated
    nests as deep as it is long).
    """
    opening = html.count(b"<")
    return opening if opening <= enough else opening - html.count(b"</")


def _deepest(html: bytes, stop_above: int) -> int:
    """The deepest nesting of ``html``'s tags, or the first depth above ``stop_above``."""
    open_by_name: Counter[bytes] = Counter()
    depth = deepest = 0
    for match in _TAG.finditer(html):
        closing, name = match.groups()
        name = name.lower()
        if name in _NOT_NESTING:
            continue
        if not closing:
            open_by_name[name] += 1
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_above:
                    break
        elif open_by_name[name]:
            open_by_name[name] -= 1
            depth -= 1
    return deepest


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
