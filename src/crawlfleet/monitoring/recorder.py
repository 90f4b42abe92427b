"""Writes every fetch attempt to the attempt log, in batches."""

from __future__ import annotations

from crawlfleet.models import Attempt
from crawlfleet.monitoring.attempt_log import AttemptLog
from crawlfleet.monitoring.events import EventBus, FetchAttempted

FLUSH_AT = 256


class AttemptRecorder:
    """Buffers ``FetchAttempted`` events; ``flush`` writes them in one batch.

    The runner flushes on every sample tick and at the end, so a killed process loses at most
    the last tick's attempt lines, never a page (pages live in the frontier).
    """

    def __init__(self, events: EventBus, log: AttemptLog) -> None:
        self._log = log
        self._buffer: list[Attempt] = []
        events.subscribe(FetchAttempted, self._on_attempt)

    def _on_attempt(self, event: FetchAttempted) -> None:
        self._buffer.append(event.attempt)

    @property
    def due(self) -> bool:
        return len(self._buffer) >= FLUSH_AT

    async def flush(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            await self._log.record(batch)
