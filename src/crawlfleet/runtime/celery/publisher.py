"""The dispatcher's side of the broker: how many tasks wait, and publishing more.

Blocking (kombu); the dispatcher calls it from a thread. One connection is kept and
re-established after a broker outage.
"""

from __future__ import annotations

import logging

from celery import Celery
from kombu.connection import Connection
from kombu.entity import Queue

from crawlfleet.runtime.celery.app import DEFAULT_QUEUE, TASK_NAME

log = logging.getLogger(__name__)


class TaskPublisher:
    """Publishes ``crawl_batch`` tasks of one crawl into one queue."""

    def __init__(self, app: Celery, crawl_id: str, *, queue: str = DEFAULT_QUEUE) -> None:
        self._app = app
        self._crawl_id = crawl_id
        self._queue: Queue = app.amqp.queues[queue]
        self._conn: Connection | None = None

    def _connection(self) -> Connection:
        if self._conn is None:
            conn: Connection = self._app.connection_for_write()
            conn.ensure_connection(max_retries=1)  # type: ignore[no-untyped-call]
            self._conn = conn
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            try:
                self._conn.release()  # type: ignore[no-untyped-call]
            except Exception as exc:  # a dead connection may fail to close; it is dropped anyway
                log.debug("closing the broker connection: %s", exc)
            self._conn = None

    def waiting(self) -> int:
        """Messages ready in the queue (not counting those delivered to a worker)."""
        try:
            conn = self._connection()
            declared = self._queue(conn.default_channel).queue_declare()  # type: ignore[no-untyped-call]
        except Exception:
            self._reset()
            raise
        return int(declared.message_count)

    def publish(self, count: int, max_leases: int) -> None:
        """Publish ``count`` tasks, each for up to ``max_leases`` leases."""
        try:
            with self._app.producer_or_acquire() as producer:
                for _ in range(count):
                    self._app.send_task(
                        TASK_NAME,
                        args=[self._crawl_id, max_leases],
                        queue=self._queue,
                        producer=producer,
                    )
        except Exception:
            self._app.pool.force_close_all()
            raise

    def close(self) -> None:
        self._reset()
