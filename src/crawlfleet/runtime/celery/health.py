"""A worker's liveness: a heartbeat that an idle worker writes too, and the probe that reads it.

A worker writes its heartbeat (``crawlfleet:workers``, ``definition.py``) while it runs a
batch, but the dispatcher publishes tasks only while a crawl has due work, so a worker
of an idle fleet would look dead. ``idle_heartbeat`` is a Celery consumer bootstep that also
writes it every ``IDLE_BEAT_EVERY_S`` from the consumer's event-loop timer. The timer fires
only between tasks, in the thread that runs them, so a fresh heartbeat proves more than a
live process: the consumer loop turns and Redis answers this worker.

A turning loop is not yet a working worker: a consumer whose task window stays full while
no task runs takes nothing more (a task whose acknowledgement was lost; kombu's Redis ack
used to do that when Redis restarted, see ``redis_transport``). Each beat says since when the
window has been ``stalled`` that way (``window_stalled``).

``host_health`` is what ``crawlfleet worker --health`` reports (a container's health check,
a Kubernetes liveness probe): the freshest heartbeat of a worker on this host (its name is
``HOST:PID``, ``wiring.worker_name``) must be under ``WORKER_SEEN_S`` old, the age after
which ``status``, the dashboard and the dispatcher stop counting a worker as live, and must
not say the worker has been stalled for ``WORKER_STALL_S`` or more.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Celery, bootsteps
from celery.worker import state
from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlfleet.redact import redact
from crawlfleet.runtime.celery.crawls import worker_beats
from crawlfleet.runtime.celery.executor import WorkerRuntime
from crawlfleet.runtime.control import WORKER_SEEN_S

log = logging.getLogger(__name__)

IDLE_BEAT_EVERY_S = 10.0
PROBE_TIMEOUT_S = 5.0
WORKER_STALL_S = 2 * IDLE_BEAT_EVERY_S
"""A worker stalled for this long (seen by two idle beats) is unhealthy."""


def window_stalled(qos: Any, running: int) -> bool:
    """Whether a consumer can take no task although none runs: its kombu ``QoS`` (prefetch
    window) is full of deliveries that no running task accounts for."""
    return running == 0 and not qos.can_consume()


def add_idle_heartbeat(app: Celery, runtime: WorkerRuntime) -> None:
    """Make ``app``'s worker write ``runtime``'s heartbeat every ``IDLE_BEAT_EVERY_S``."""

    class IdleHeartbeat(bootsteps.StartStopStep):  # type: ignore[misc]  # Celery is untyped
        requires = ("celery.worker.consumer.tasks:Tasks",)

        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            self._timer_entry: Any = None
            self._stalled_since: float | None = None

        def start(self, parent: Any) -> None:
            runtime.beat()  # at once: a fresh worker is live before its first task
            self._timer_entry = parent.timer.call_repeatedly(
                IDLE_BEAT_EVERY_S, self._beat, (parent,)
            )

        def _beat(self, parent: Any) -> None:
            channel = getattr(parent.task_consumer, "channel", None)
            qos = getattr(channel, "qos", None)
            if qos is not None and window_stalled(qos, len(state.active_requests)):
                self._stalled_since = self._stalled_since or time.time()
                log.error(
                    "no task taken for %.0f s: the task window is full but no task runs",
                    time.time() - self._stalled_since,
                )
            else:
                self._stalled_since = None
            runtime.beat(self._stalled_since)

        def stop(self, parent: Any) -> None:
            if self._timer_entry is not None:
                self._timer_entry.cancel()
                self._timer_entry = None

    app.steps["consumer"].add(IdleHeartbeat)


async def host_health(redis_url: str, host: str, now: float) -> tuple[bool, str]:
    """Whether a worker of ``host`` has a fresh heartbeat, and one line saying so or why not."""
    client = Redis.from_url(
        redis_url,
        decode_responses=True,
        socket_connect_timeout=PROBE_TIMEOUT_S,
        socket_timeout=PROBE_TIMEOUT_S,
    )
    try:
        beats = [b for b in await worker_beats(client) if b.name.rpartition(":")[0] == host]
    except (RedisError, OSError) as exc:
        return False, f"Redis at {redact(redis_url)} unreachable: {' '.join(str(exc).split())}"
    finally:
        await client.aclose()
    if not beats:
        return False, f"no worker of host {host} has sent a heartbeat"
    age_s = now - beats[0].seen_at
    if age_s >= WORKER_SEEN_S:
        return False, (
            f"worker {beats[0].name}: last heartbeat {age_s:.0f} s ago "
            f"(live under {WORKER_SEEN_S:.0f} s)"
        )
    stalled_since = beats[0].stalled_since
    if stalled_since is not None and now - stalled_since >= WORKER_STALL_S:
        return False, (
            f"worker {beats[0].name}: took no task for {now - stalled_since:.0f} s, its task "
            "window full with no task running (restart it)"
        )
    return True, f"worker {beats[0].name}: heartbeat {age_s:.1f} s ago"
