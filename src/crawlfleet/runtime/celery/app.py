"""The Celery application factory: JSON only, late acks, two tasks, two queues.

Nothing is configured at import time: ``make_app`` builds an app for one broker and
``runtime.celery.tasks.register`` adds the task to a worker's app. The dispatcher only
publishes (``send_task`` by name), so its app has no task registered. ``check_broker`` is
the start-up check of both: Celery itself retries an unusable broker forever.
"""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery
from kombu.connection import Connection
from kombu.entity import Exchange, Queue

from crawlfleet.errors import ConfigError, StateError
from crawlfleet.redact import redact
from crawlfleet.redisurl import is_cluster_url

TASK_NAME = "crawlfleet.crawl_batch"
REPARSE_TASK_NAME = "crawlfleet.reparse_file"
"""A distributed reparse's task: one WARC file (``reparse_jobs.py``)."""
QUEUES = ("http", "browser")
DEFAULT_QUEUE = "http"
BROKER_CHECK_S = 5.0


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """How long one task may run, and how long the broker waits before redelivering it.

    ``soft_s`` and ``hard_s`` are Celery's time limits (enforced by the prefork pool; the solo
    pool relies on the task's own ``batch_s`` bound). ``visibility_s`` is the Redis
    transport's visibility timeout: an unacknowledged task is redelivered after it, so it
    must exceed the hard limit or a running task is handed to a second worker.
    """

    batch_s: float = 2.0
    soft_s: float = 150.0  # a batch, plus its last pages' total fetch timeout (60 s default)
    hard_s: float = 180.0
    visibility_s: float = 3600.0

    def validate(self) -> None:
        if not 0 < self.batch_s < self.soft_s:
            raise ConfigError(
                f"task batch time ({self.batch_s} s) must be below the soft time limit "
                f"({self.soft_s} s)"
            )
        if self.soft_s >= self.hard_s:
            raise ConfigError(
                f"soft time limit ({self.soft_s} s) must be below the hard limit ({self.hard_s} s)"
            )
        if self.hard_s >= self.visibility_s:
            raise ConfigError(
                f"hard time limit ({self.hard_s} s) must be below the broker visibility timeout "
                f"({self.visibility_s} s), or a running task is delivered twice"
            )


def make_app(broker_url: str, limits: TaskLimits | None = None) -> Celery:
    """A Celery app for ``broker_url`` (``redis://`` or ``amqp://``); ``ConfigError`` if unsound.

    A ``redis://`` broker gets ``redis_transport.Transport``, which drops junk queue entries.
    """
    limits = limits or TaskLimits()
    limits.validate()
    app = Celery("crawlfleet", broker=broker_url, set_as_current=False)
    if broker_url.startswith("redis://"):
        from crawlfleet.runtime.celery.redis_transport import Transport  # needs the redis extra

        app.conf.broker_transport = Transport
    exchange = Exchange("crawlfleet", type="direct")  # type: ignore[no-untyped-call]
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        event_serializer="json",
        task_ignore_result=True,
        result_backend=None,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_soft_time_limit=limits.soft_s,
        task_time_limit=limits.hard_s,
        broker_transport_options={"visibility_timeout": limits.visibility_s},
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,
        task_queues=[
            Queue(name, exchange, routing_key=name)  # type: ignore[no-untyped-call]
            for name in QUEUES
        ],
        task_default_queue=DEFAULT_QUEUE,
        task_default_exchange=exchange.name,
        task_default_routing_key=DEFAULT_QUEUE,
        task_routes={
            TASK_NAME: {"queue": DEFAULT_QUEUE},
            REPARSE_TASK_NAME: {"queue": DEFAULT_QUEUE},
        },
        task_create_missing_queues=False,
        worker_send_task_events=False,
        worker_enable_remote_control=False,
    )
    return app


def _one_line(text: str) -> str:
    return " ".join(text.split())


def check_broker(broker_url: str, timeout_s: float = BROKER_CHECK_S) -> None:
    """Import the broker's transport and connect to it once, within ``timeout_s``.

    ``ConfigError`` if the URL is not a broker URL or its transport (or a module the transport
    needs) cannot be imported; ``StateError`` if the broker cannot be reached. One line each,
    without the password.
    """
    if is_cluster_url(broker_url):
        raise ConfigError(
            "Celery's Redis transport cannot use a Redis Cluster: give the broker as a plain "
            "Redis or RabbitMQ URL (--broker redis://HOST:PORT/1 or amqp://...)"
        )
    try:
        where = redact(broker_url)
        conn = Connection(  # type: ignore[no-untyped-call]
            broker_url,
            connect_timeout=timeout_s,
            transport_options={"socket_connect_timeout": timeout_s, "socket_timeout": timeout_s},
        )
        errors = conn.connection_errors + conn.channel_errors
    except ImportError as exc:
        raise ConfigError(_one_line(_missing(broker_url, exc))) from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ConfigError(_one_line(f"bad Celery broker URL: {exc}")) from None
    try:
        conn.ensure_connection(  # type: ignore[no-untyped-call]
            max_retries=0, reraise_as_library_errors=False, timeout=timeout_s
        )
    except ImportError as exc:  # some transports import their client library on connect
        raise ConfigError(_one_line(_missing(broker_url, exc))) from None
    except (*errors, OSError) as exc:
        raise StateError(_one_line(f"Celery broker at {where} unreachable: {exc}")) from None
    finally:
        conn.release()  # type: ignore[no-untyped-call]


def _missing(broker_url: str, exc: ImportError) -> str:
    scheme = broker_url.partition(":")[0]
    return (
        f"the Celery broker transport for {scheme}:// cannot be imported: {exc}; "
        "install the module it names"
    )
