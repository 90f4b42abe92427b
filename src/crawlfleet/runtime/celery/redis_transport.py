"""kombu's Redis transport, made to drop a queue entry that is not a message instead of dying,
and to keep consuming when Redis is gone at the moment a task is acknowledged.

kombu pops an entry off a queue list (``BRPOP``) and decodes it as JSON before anything can
reject it: one ``LPUSH http <junk>`` on the broker raised out of the worker's event loop
("Unrecoverable error: JSONDecodeError") and stopped the worker. Here an entry that is not
JSON, or is JSON but not a kombu message envelope, is logged and dropped (it is already off
the list, so nothing is redelivered) and the worker goes on. A well-formed envelope with a
body Celery does not accept is Celery's to reject, as before.

kombu acknowledges a task on Redis by removing it from the unacknowledged index, and only
then forgets it locally. With Redis down at that moment (a restart of a few seconds) the
removal raised, the task stayed counted as delivered, and with a prefetch window of one the
worker never took another task while its heartbeat stayed fresh. ``QoS`` forgets the task
locally whatever Redis says and removes it from the index once Redis answers again (at the
next delivery); until then it sits in the index, and were that to outlast the visibility
timeout the task would be delivered again, which a crawl batch allows (tasks are idempotent).

Used for ``redis://`` brokers (``app.make_app``); ``rediss://`` keeps kombu's own transport,
whose TLS defaults depend on the scheme name.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
from queue import Empty
from typing import Any

from kombu.transport import redis, virtual
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)

NOT_JSON = (json.JSONDecodeError, UnicodeDecodeError)
UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


def envelope_problem(payload: Any) -> str | None:
    """Why ``payload`` (a decoded queue entry) is not a kombu message envelope; None if it is.

    Checks what kombu reads before Celery sees a message: the properties with a delivery tag
    and ``delivery_info`` (exchange, routing key), the headers, and a body that decodes with
    its ``body_encoding``.
    """
    if not isinstance(payload, dict):
        return f"a JSON {type(payload).__name__}, not an object"
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        return "no properties object"
    if not isinstance(properties.get("delivery_tag"), str):
        return "no delivery tag"
    info = properties.get("delivery_info")
    if not isinstance(info, dict):
        return "no delivery_info object"
    for key in ("exchange", "routing_key"):
        if not isinstance(info.get(key), str):
            return f"delivery_info has no {key}"
    if not isinstance(payload.get("headers", {}), dict):
        return "the headers are not an object"
    for key in ("content-type", "content-encoding"):
        if not isinstance(payload.get(key, ""), str):
            return f"{key} is not a string"
    return _body_problem(payload.get("body"), properties.get("body_encoding"))


def _body_problem(body: Any, encoding: Any) -> str | None:
    if not isinstance(body, str):
        return "the body is not a string"
    if encoding == "base64":
        try:
            base64.b64decode(body, validate=True)
        except binascii.Error:
            return "the body is not base64"
    elif encoding is not None:
        return f"unknown body encoding {str(encoding)[:40]!r}"
    return None


def _drop_undecodable(exc: Exception) -> Empty:
    log.error("dropped a broker queue entry that is not JSON: %s", " ".join(str(exc).split()))
    return Empty()


class QoS(redis.QoS):
    """kombu's Redis ack emulation, which frees the prefetch window even when Redis is down.

    An acknowledged (or dropped) task whose removal from the unacknowledged index failed is
    forgotten locally at once and its removal is sent again before the next delivery is
    recorded.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.unremoved: set[str] = set()
        """Delivery tags settled here whose index entries Redis has not yet dropped."""

    def append(self, message: Any, delivery_tag: str) -> None:
        if self.unremoved:
            with contextlib.suppress(*UNREACHABLE):  # sent again before the next delivery
                self._remove_settled()
        super().append(message, delivery_tag)  # type: ignore[no-untyped-call]

    def ack(self, delivery_tag: str) -> None:
        self._settle(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if not requeue:
            self._settle(delivery_tag)
            return
        try:
            super().reject(delivery_tag, requeue=True)  # type: ignore[no-untyped-call]
        except UNREACHABLE as exc:
            # Still in the index: restored to its queue after the visibility timeout.
            virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
            log.warning("requeue of task %s deferred, Redis unreachable: %s", delivery_tag, exc)

    def _settle(self, delivery_tag: str) -> None:
        virtual.QoS.ack(self, delivery_tag)  # type: ignore[no-untyped-call]
        self.unremoved.add(delivery_tag)
        try:
            self._remove_settled()
        except UNREACHABLE as exc:
            log.warning(
                "ack of task %s deferred until Redis answers (%d waiting): %s",
                delivery_tag,
                len(self.unremoved),
                " ".join(str(exc).split()),
            )

    def _remove_settled(self) -> None:
        """Drop every settled tag from the unacknowledged index; raises if Redis is down."""
        tags = list(self.unremoved)
        with self.pipe_or_acquire() as pipe:
            for tag in tags:
                self._remove_from_indices(tag, pipe)  # type: ignore[no-untyped-call]
            pipe.execute()
        self.unremoved.difference_update(tags)


class Channel(redis.Channel):
    """Reads like kombu's, drops an entry that does not decode as JSON, acks with ``QoS``."""

    QoS = QoS

    def _brpop_read(self, **options: Any) -> Any:
        try:
            return super()._brpop_read(**options)  # type: ignore[no-untyped-call]
        except NOT_JSON as exc:
            raise _drop_undecodable(exc) from None

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        """``timeout`` is the abstract signature's; kombu's Redis channel takes none."""
        try:
            return super()._get(queue)  # type: ignore[no-untyped-call]
        except NOT_JSON as exc:
            raise _drop_undecodable(exc) from None


class Transport(redis.Transport):
    """kombu's Redis transport with ``Channel`` above; drops entries that are not messages.

    An entry that is an envelope but makes Celery raise while it takes the message (a crafted
    header or body can) is logged with its traceback and rejected without requeueing, instead
    of stopping the worker. Broker connection errors still propagate: Celery reconnects.
    """

    Channel = Channel

    def _deliver(self, message: Any, queue: str) -> None:
        problem = envelope_problem(message)
        if problem is not None:
            log.error(
                "dropped a broker queue entry on %r that is not a message: %s", queue, problem
            )
            return
        try:
            super()._deliver(message, queue)  # type: ignore[no-untyped-call]
        except (*self.connection_errors, *self.channel_errors):
            raise
        except Exception:
            log.exception("dropped a broker queue entry on %r that Celery could not take", queue)
            self._reject(message["properties"]["delivery_tag"])

    def _reject(self, delivery_tag: str) -> None:
        """Forget a message some channel holds as delivered and unacknowledged."""
        for channel in self.channels:
            try:
                channel.qos.get(delivery_tag)
            except KeyError:
                continue
            channel.basic_reject(delivery_tag, requeue=False)
