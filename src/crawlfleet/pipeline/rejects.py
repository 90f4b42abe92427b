"""Invalid items, kept with their reason instead of being dropped silently."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


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


class MemoryRejects:
    """Rejects kept in a list, for tests and throwaway crawls."""

    def __init__(self) -> None:
        self.rejects: list[Reject] = []

    async def add(self, rejects: Sequence[Reject]) -> None:
        self.rejects.extend(rejects)
