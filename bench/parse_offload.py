"""What a parse process would take off the embedded crawl's process, and what it would add.

The embedded crawl is one interpreter at ~100 % of a core (issue 11); the idea weighed here is
a second process that parses, fed by the crawl's process over a pipe (decision 0036). Three
figures a page, on the bench site's pages held in memory, with bench/bench_parsers.py:

- **inline**: the crawl process's CPU to parse the page itself (``ParseBudget.parse``: the
  nesting pre-check, the plugin and its links under the deadline), as the crawl step does;
- **hand-off, crawl side**: the crawl process's CPU to send the page to a forked parse process
  (its URL, headers and body, ``marshal``led, length-prefixed, 16 pages in flight)
  and to rebuild the ``Link``s and ``Item``s from the URLs and item tuples it sends back
  (one write a page each way);
- **hand-off, parse side**: the parse process's CPU for the same pages (its ``rusage``).

No network: a lower bound of the hand-off (an event loop's reads and wake-ups come on top).

    .venv/bin/python bench/parse_offload.py [--sample 4000] [--repeat 3]
"""

from __future__ import annotations

import asyncio
import marshal
import os
import statistics
import struct
import time
from pathlib import Path
from typing import Any, BinaryIO

from machine import describe_machine
from parse_bench import bench_registry, page_arguments, sample_pages
from results import write_section

from crawlfleet.models import FetchResult, Item, ParseResult, found_link
from crawlfleet.parsing.budget import ParseBudget
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.options import parse_limits
from crawlfleet.settings import Settings

HEADERS = {"content-type": "text/html; charset=utf-8", "server": "nginx", "etag": '"5f2a-1c"'}
IN_FLIGHT = 16
_LENGTH = struct.Struct("<I")

Page = tuple[str, bytes]


def read_frame(stream: BinaryIO) -> Any:
    head = stream.read(_LENGTH.size)
    if not head:
        return None
    return marshal.loads(stream.read(_LENGTH.unpack(head)[0]))


def write_frame(stream: BinaryIO, value: Any) -> None:
    data = marshal.dumps(value)
    stream.write(_LENGTH.pack(len(data)) + data)


async def parse(
    budget: ParseBudget, registry: ParserRegistry, url: str, headers: dict[str, str], body: bytes
) -> ParseResult:
    """The page parsed as the crawl step parses it: its parser, under the budget."""
    result = FetchResult(url, url, 200, headers, body, 0.0)
    parsed, _ = await budget.parse(registry.select(url)[1], result)
    return parsed


async def parse_inline(budget: ParseBudget, registry: ParserRegistry, pages: list[Page]) -> None:
    for url, body in pages:
        await parse(budget, registry, url, HEADERS, body)


async def serve(
    budget: ParseBudget, registry: ParserRegistry, requests: BinaryIO, replies: BinaryIO
) -> None:
    """The parse process: a page in, its link URLs and item tuples out, until EOF."""
    while (page := read_frame(requests)) is not None:
        url, headers, body = page
        parsed = await parse(budget, registry, url, headers, body)
        links = [link.url for link in parsed.links]
        items = [(item.type, item.data, item.key, item.url) for item in parsed.items]
        write_frame(replies, (links, items))


def hand_off(
    budget: ParseBudget, registry: ParserRegistry, pages: list[Page]
) -> tuple[float, float]:
    """(crawl side, parse side) CPU seconds to parse ``pages`` in a forked process."""
    requests_in, requests_out = os.pipe()
    replies_in, replies_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns into its parent's code, whatever happens
        status = 1
        try:
            os.close(requests_out)
            os.close(replies_in)
            requests = os.fdopen(requests_in, "rb", buffering=1 << 20)
            with requests, os.fdopen(replies_out, "wb", buffering=0) as replies:
                asyncio.run(serve(budget, registry, requests, replies))
            status = 0
        finally:
            os._exit(status)
    os.close(requests_in)
    os.close(replies_out)
    started = time.thread_time()
    with (
        os.fdopen(requests_out, "wb", buffering=0) as requests,
        os.fdopen(replies_in, "rb") as replies,
    ):
        sent = received = 0
        while received < len(pages):
            while sent < len(pages) and sent - received < IN_FLIGHT:
                url, body = pages[sent]
                write_frame(requests, (url, HEADERS, body))
                sent += 1
            reply = read_frame(replies)
            if reply is None:
                raise SystemExit("the parse process ended early: see its traceback above")
            urls, items = reply
            # Built as the crawl step would get them, and dropped: only their cost counts.
            [found_link(url) for url in urls]
            [Item(type=t, data=d, key=k, url=u) for t, d, k, u in items]
            received += 1
    crawl_side_s = time.thread_time() - started
    _, _, usage = os.wait4(pid, 0)
    return crawl_side_s, usage.ru_utime + usage.ru_stime


def measure(pages: list[Page], parsers: Path, repeat: int) -> dict[str, float]:
    registry = bench_registry(parsers)
    budget = ParseBudget(parse_limits(Settings()))
    inline, crawl_side, parse_side = [], [], []
    for _ in range(repeat):
        started = time.thread_time()
        asyncio.run(parse_inline(budget, registry, pages))
        inline.append(time.thread_time() - started)
        ours, theirs = hand_off(budget, registry, pages)
        crawl_side.append(ours)
        parse_side.append(theirs)
    per_page = 1e6 / len(pages)
    return {
        "inline": statistics.median(inline) * per_page,
        "crawl side": statistics.median(crawl_side) * per_page,
        "parse side": statistics.median(parse_side) * per_page,
    }


def report(figures: dict[str, float], pages: int, repeat: int) -> str:
    saved = figures["inline"] - figures["crawl side"]
    added = figures["crawl side"] + figures["parse side"] - figures["inline"]
    return "\n".join(
        [
            f"{pages} pages of the bench site, median of {repeat} passes, CPU µs a page:",
            "",
            "| inline parse | hand-off: crawl side | hand-off: parse side |"
            " crawl process saves | both processes add |",
            "| --- | --- | --- | --- | --- |",
            f"| {figures['inline']:.0f} | {figures['crawl side']:.0f} | "
            f"{figures['parse side']:.0f} | {saved:.0f} | {added:.0f} |",
        ]
    )


def main() -> None:
    args = page_arguments(__doc__.split("\n")[0])
    pages = [(url, Path(file).read_bytes()) for url, file in sample_pages(args.site, args.sample)]
    text = report(measure(pages, args.parsers, args.repeat), len(pages), args.repeat)
    print(text)
    if not args.no_results:
        body = (
            "## Parse hand-off: what a parse process would take off the crawl's process\n\n"
            f"{describe_machine()}\n\n{text}\n\n"
            "Rerun: `.venv/bin/python bench/parse_offload.py` (decision 0036)"
        )
        write_section(args.results, "parse-offload", body)


if __name__ == "__main__":
    main()
