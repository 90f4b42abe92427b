"""A sink wrapper that runs writes one at a time, for sinks that hold a single connection."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from crawlfleet.models import Item
from crawlfleet.pipeline.protocols import Sink


class SerialSink:
    """Runs ``write`` calls one after the other.

    ``PostgresSink`` holds one connection, and a worker's pages in flight write concurrently.
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._lock = asyncio.Lock()

    async def write(self, items: Sequence[Item]) -> None:
        async with self._lock:
            await self._sink.write(items)

    async def close(self) -> None:
        await self._sink.close()
