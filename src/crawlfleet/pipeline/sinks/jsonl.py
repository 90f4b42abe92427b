"""A live JSON Lines file: every stored item appended as one line, as it is stored."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import orjson

from crawlfleet.models import Item
from crawlfleet.pipeline.hashing import record
from crawlfleet.pipeline.sinks.appender import Appender


class JsonlSink:
    """Appends ``{"type", "key", **fields}`` per item; no upsert, so a re-seen item appears again.

    Each ``write`` lands whole or not at all (see ``Appender``); ``fsync`` as there.
    """

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self._appender = Appender(path, fsync=fsync)

    async def write(self, items: Sequence[Item]) -> None:
        if items:
            await self._appender.append(
                b"".join(orjson.dumps(record(item)) + b"\n" for item in items)
            )

    async def close(self) -> None:
        await self._appender.close()
