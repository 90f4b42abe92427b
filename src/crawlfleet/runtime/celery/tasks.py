"""The Celery tasks: "claim and process up to N due leases of crawl X" (``crawl_batch``), and
"reparse WARC file F of archive A into crawl X's items" (``reparse_file``, ``reparse_jobs.py``).

Tasks are generic and idempotent: running a batch twice, or after its worker died, only claims
whatever is due at that moment; reparsing a file twice upserts the same items. A message with the wrong arguments is rejected (logged, not
requeued, never run); Celery itself rejects unknown task names and non-JSON bodies.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from celery import Celery, Task
from celery.exceptions import Reject

from crawlfleet.runtime.celery.app import REPARSE_TASK_NAME, TASK_NAME
from crawlfleet.runtime.celery.executor import WorkerRuntime

log = logging.getLogger(__name__)

CRAWL_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_LEASES_PER_TASK = 10_000
JOB_ID = re.compile(r"^[0-9a-f]{1,32}$")


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


def parse_reparse_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, ...]:
    """``(crawl_id, job, source, name)`` of a reparse task; ``ValueError`` if malformed.

    ``name`` is a file's path relative to the archive: never absolute, never ``..``.
    """
    if kwargs or len(args) != 4 or not all(isinstance(arg, str) for arg in args):
        raise ValueError(f"expected (crawl_id, job, source, name), got {args!r} {kwargs!r}")
    crawl_id, job, source, name = args
    if not CRAWL_ID.match(crawl_id):
        raise ValueError(f"bad crawl id {crawl_id!r}")
    if not JOB_ID.match(job):
        raise ValueError(f"bad reparse job id {job!r}")
    parts = name.split("/")
    if not name or name.startswith("/") or ".." in parts or not name.endswith(".warc.gz"):
        raise ValueError(f"bad WARC file name {name!r}")
    return crawl_id, job, source, name


def register(app: Celery, runtime: WorkerRuntime) -> None:
    """Add the tasks to ``app``, running on ``runtime`` (one per worker process)."""

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

    @app.task(name=REPARSE_TASK_NAME, bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
    def reparse(self: Task, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            crawl_id, job, source, name = parse_reparse_args(args, kwargs)
        except ValueError as exc:
            log.error("rejected malformed task %s: %s", self.request.id, exc)
            raise Reject(str(exc), requeue=False) from None
        return runtime.run(runtime.reparse(crawl_id, job, source, name))
