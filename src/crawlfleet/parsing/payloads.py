"""The check every parser's links pass: a context small and JSON-serializable, text headers.

A request's context and headers are stored with it in every frontier store as JSON, so a
context that is not JSON (a set, a non-text key, a date) or is larger than
``max_context_bytes`` is the parser's error: its page ends as ``parse_error`` naming the
parser (``runtime.step.crawler``), and no link of that page is queued.
"""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from crawlfleet.models import Link
from crawlfleet.redact import redact


def check_payloads(links: Iterable[Link], max_context_bytes: int) -> None:
    """Raise ``ValueError`` for the first link whose context or headers cannot be stored."""
    for link in links:
        if link.data:
            try:
                size = len(orjson.dumps(link.data))
            except TypeError as exc:
                raise ValueError(
                    redact(f"the context of {link.url} is not JSON-serializable: {exc}")
                ) from None
            if size > max_context_bytes:
                raise ValueError(
                    redact(
                        f"the context of {link.url} is {size} bytes as JSON, over "
                        f"max_context_bytes ({max_context_bytes})"
                    )
                )
        if not link.headers:  # most links
            continue
        for name, value in link.headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise ValueError(redact(f"header {name!r} of {link.url} is not text: {value!r}"))
