"""Copies the attempts a store keeps pending (Redis, memory) into an external attempt log.

The store appends each attempt in the same atomic step as the lease end it describes, so a
killed worker loses no attempt; the dispatcher then copies them in order: read the oldest
``batch`` (``pending_attempts``), ``record`` them (idempotent), and only then acknowledge
them (``ack_attempts``). A copier killed between the two copies the same rows again, and the
log's unique ``(crawl_id, fingerprint, retry, at)`` keeps one of each.
"""

from __future__ import annotations

from typing import Protocol

from crawlfleet.monitoring.attempt_log import AttemptLog
from crawlfleet.records import Attempt

BATCH = 500


class PendingAttempts(Protocol):
    """Where pending attempts are read and acknowledged (``Frontier`` or a ``QueueStore``)."""

    async def pending_attempts(self, limit: int) -> list[Attempt]: ...

    async def ack_attempts(self, count: int) -> None: ...


class AttemptCopier:
    """Moves pending attempts from ``source`` to ``log``, oldest first."""

    def __init__(self, source: PendingAttempts, log: AttemptLog, *, batch: int = BATCH) -> None:
        self._source = source
        self._log = log
        self._batch = batch

    async def copy(self, max_batches: int = 20) -> int:
        """Copy up to ``max_batches`` batches; how many attempts were copied.

        Stops early once the pending list is drained. ``StateError`` from the log leaves
        the attempts pending for the next call.
        """
        copied = 0
        for _ in range(max_batches):
            attempts = await self._source.pending_attempts(self._batch)
            if not attempts:
                break
            await self._log.record(attempts)
            await self._source.ack_attempts(len(attempts))
            copied += len(attempts)
            if len(attempts) < self._batch:
                break
        return copied
