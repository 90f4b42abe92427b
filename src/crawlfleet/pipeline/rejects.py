"""Invalid items, kept with their reason instead of being dropped silently."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from crawlfleet.pipeline.text import strip_nul


@dataclass(frozen=True, slots=True)
class Reject:
    """An item that failed validation: what it held, where it came from, why (``at``: epoch s)."""

    item_type: str
    item_key: str | None
    url: str
    reason: str
    data: dict[str, Any]
    at: float


class RejectStore(Protocol):
    """Keeps rejected items.

    When ``add`` returns, the rejects are durable; an exception means none may be assumed kept.
    """

    async def add(self, rejects: Sequence[Reject]) -> None: ...


def reject_row(reject: Reject) -> tuple[str, str | None, str, str, str]:
    """(item_type, item_key, url, reason, data as JSON text) as a store keeps them.

    NUL is removed from every string (``text.strip_nul``); a value JSON cannot hold is kept
    as its ``repr``.
    """
    data = orjson.loads(orjson.dumps(reject.data, default=repr, option=orjson.OPT_NON_STR_KEYS))
    return (
        strip_nul(reject.item_type),
        strip_nul(reject.item_key) if reject.item_key is not None else None,
        strip_nul(reject.url),
        strip_nul(reject.reason),
        orjson.dumps(strip_nul(data)).decode(),
    )


class MemoryRejects:
    """Rejects kept in a list, for tests and throwaway crawls."""

    def __init__(self) -> None:
        self.rejects: list[Reject] = []

    async def add(self, rejects: Sequence[Reject]) -> None:
        self.rejects.extend(rejects)
