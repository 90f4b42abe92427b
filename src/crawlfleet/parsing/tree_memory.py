"""The memory of parse trees: large pages parsed a few bytes at a time, the heap given back.

A tree is many times its page: lexbor builds 187 MB for a 9.5 MB rustdoc source listing
(a ``<span>`` a token), and glibc keeps that memory in the parse thread's arena after the tree
is freed. So the parses run in threads hold their bodies' bytes in a ``ParseBytes`` (one
page always may, so a page larger than the limit parses alone), and after the parse of a
page of ``TRIM_AFTER_BYTES`` or more the C heap's free pages go back to the system
(``malloc_trim``: 11-22 ms, against 130 ms for the parse of that page; decision 0048).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from functools import cache

# Pages parsed in threads at once: up to this many bytes of them, or one page of any size.
PARSE_BYTES_AT_ONCE = 4 * 1024 * 1024
TRIM_AFTER_BYTES = 1024 * 1024


class ParseBytes:
    """Bytes of the pages being parsed, at most ``limit`` unless one page alone is larger.

    Pages are let in in the order they asked; ``take`` may wait, ``give_back`` never does.
    """

    def __init__(self, limit_bytes: int = PARSE_BYTES_AT_ONCE) -> None:
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def take(self, size_bytes: int) -> None:
        """Wait until a page of ``size_bytes`` fits, and hold it; a cancelled wait holds nothing."""
        if not self._waiting and self._fits(size_bytes):
            self.held_bytes += size_bytes
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((size_bytes, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # let in just as it was cancelled
                self.give_back(size_bytes)
            raise

    def give_back(self, size_bytes: int) -> None:
        """A parse ended: its bytes let the pages waiting in, in order, while they fit."""
        self.held_bytes -= size_bytes
        waiting = self._waiting
        while waiting and (waiting[0][1].done() or self._fits(waiting[0][0])):
            size, future = waiting.popleft()
            if not future.done():
                self.held_bytes += size
                future.set_result(None)

    def _fits(self, size_bytes: int) -> bool:
        return self.held_bytes == 0 or self.held_bytes + size_bytes <= self.limit_bytes


def return_free_heap() -> None:
    """Give the C heap's free pages back to the system: glibc's ``malloc_trim``; elsewhere
    there is nothing to call and nothing happens."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes  # here: only a crawl that meets a large page needs it

    try:
        function: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except AttributeError:  # not glibc
        return None
    return function
