"""The one Celery task: "claim and process up to N due leases of crawl X".

Tasks are generic and idempotent: running one twice, or after its worker died, only claims
whatever is due at that moment. A message with the wrong arguments is rejected (logged, not
requeued, never run); Celery itself rejects unknown task names and non-JSON bodies.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from celery import Celery, Task
from celery.exceptions import Reject

from crawlfleet.runtime.celery.app import TASK_NAME
from crawlfleet.runtime.celery.executor import WorkerRuntime

log = logging.getLogger(__name__)

CRAWL_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_LEASES_PER_TASK = 10_000


def parse_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, int]:
    """``(crawl_id, max_leases)`` from a task's arguments; ``ValueError`` if malformed."""
    if kwargs or len(args) != 2:
        raise ValueError(f"expected (crawl_id, max_leases), got args={args!r} kwargs={kwargs!r}")
    crawl_id, max_leases = args
    if not isinstance(crawl_id, str) or not CRAWL_ID.match(crawl_id):
        raise ValueError(f"bad crawl id {crawl_id!r}")
    if (
        not isinstance(max_leases, int)
        or isinstance(max_leases, bool)
        or not 0 < max_leases <= MAX_LEASES_PER_TASK
    ):
        raise ValueError(f"bad max_leases {max_leases!r}")
    return crawl_id, max_leases


def register(app: Celery, runtime: WorkerRuntime) -> Task:
    """Add the crawl task to ``app``, running on ``runtime`` (one per worker process)."""

    @app.task(name=TASK_NAME, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def crawl_batch(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            crawl_id, max_leases = parse_args(args, kwargs)
        except ValueError as exc:
            log.error("rejected malformed task %s: %s", self.request.id, exc)
            raise Reject(str(exc), requeue=False) from None
        result = runtime.run(runtime.batch(crawl_id, max_leases))
        log.debug("task %s: %s", self.request.id, result.to_dict())
        return result.to_dict()

    task: Task = crawl_batch
    return task
