"""Python's cyclic garbage collector, set for a crawling process (``crawl`` and ``worker``).

CPython collects its youngest generation after 700 more container objects were made than
freed. A crawl keeps 64 pages in flight, each with its requests, response, parse results and
coroutines alive, so a collection every 700 allocations finds most of them still alive and
promotes them; they die in the older generations, which then fill up and trigger full
collections that walk every object of the process (~150,000 in a worker: Celery, kombu,
redis-py, the parsers). Measured on the bench site (20,000 pages, decision 0026), CPU spent
collecting: a distributed worker 4.3 s of its 31 s (14 %; 30 full collections of ~100 ms,
each a stall of the event loop), the embedded crawl 1.6 s of its 25 s.

With 10,000, short-lived objects die young: the worker spends 0.23 s collecting, the
embedded crawl 0.08 s. The collector still runs (cycles are found ~14 times less often, a few
MB of garbage at most) and the older generations keep their defaults. Only the CLI's
long-running commands call this: a program that runs ``Crawl`` itself owns its process's
collector.
"""

from __future__ import annotations

import gc

YOUNGEST_THRESHOLD = 10_000


def tune_collector() -> None:
    """Collect the youngest generation after ``YOUNGEST_THRESHOLD`` net allocations."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNGEST_THRESHOLD, middle, oldest)
