"""kombu's Redis transport, made to drop a queue entry that is not a message instead of dying.

kombu pops an entry off a queue list (``BRPOP``) and decodes it as JSON before anything can
reject it: one ``LPUSH http <junk>`` on the broker raised out of the worker's event loop
("Unrecoverable error: JSONDecodeError") and stopped the worker. Here an entry that is not
JSON, or is JSON but not a kombu message envelope, is logged and dropped (it is already off
the list, so nothing is redelivered) and the worker goes on. A well-formed envelope with a
body Celery does not accept is Celery's to reject, as before.

Used for ``redis://`` brokers (``app.make_app``); ``rediss://`` keeps kombu's own transport,
whose TLS defaults depend on the scheme name.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from queue import Empty
from typing import Any

from kombu.transport import redis

log = logging.getLogger(__name__)

NOT_JSON = (json.JSONDecodeError, UnicodeDecodeError)


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


class Channel(redis.Channel):
    """Reads like kombu's, and drops an entry that does not decode as JSON."""

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
