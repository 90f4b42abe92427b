"""Which fetcher kinds a crawl names, and the start-up check that some runner serves each.

A request's fetcher kind comes from the link rule (``Follow(fetcher=...)``) that found it,
or from the URL (``file:``); the default is ``http``. A kind nothing in this build can fetch
is a configuration error at start, naming the parser and rule, never a silent fallback.

``impersonate`` (``fetchers/impersonate.py``) is servable when curl_cffi is installed (the
``stealth`` extra). Its requests go to the ``http`` Celery queue: an HTTP worker fetches both
kinds in one process, as it must anyway when a domain's strategy turns its http requests into
impersonated ones (docs/decisions/0018-strategy-ladder.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from importlib.util import find_spec

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.plugins import Follow
from crawlfleet.parsing.registry import ParserRegistry

IMPERSONATE = "impersonate"
_IMPERSONATION = (IMPERSONATE,) if find_spec("curl_cffi") is not None else ()

SERVABLE_KINDS = ("http", "file", *_IMPERSONATION)
"""The fetcher kinds the embedded runner serves (``browser`` has no fetcher yet)."""

QUEUES = ("http", "browser")
"""The Celery queues of the distributed runtime."""

QUEUE_KINDS = {"http": ("http", *_IMPERSONATION), "browser": ("browser",)}
"""The fetcher kinds each Celery queue carries."""

WORKER_KINDS = ("http", *_IMPERSONATION)
"""The kinds a distributed worker of this build serves (``file:`` URLs are local: embedded)."""


def queue_kinds(queues: Collection[str]) -> frozenset[str]:
    """The fetcher kinds a worker serving ``queues`` claims."""
    return frozenset(kind for queue in queues for kind in QUEUE_KINDS.get(queue, (queue,)))


def named_kinds(registry: ParserRegistry) -> Iterator[tuple[str, str]]:
    """``(kind, where)`` for every fetcher kind a parser's follow rule names."""
    for spec in registry.specs:
        rules: Sequence[Follow] = getattr(spec.parse, "follow", ())
        for number, rule in enumerate(rules, 1):
            if rule.fetcher is not None:
                where = f"parser {spec.name!r} ({spec.source}), follow rule {number}"
                yield rule.fetcher, where


def check_kinds(
    named: Iterator[tuple[str, str]] | Sequence[tuple[str, str]],
    servable: Collection[str] = SERVABLE_KINDS,
) -> None:
    """``ConfigError`` (one line) for the first named kind not in ``servable``."""
    for kind, where in named:
        if kind not in servable:
            raise ConfigError(
                f"{where} names fetcher {kind!r}, which no runner of this build serves "
                f"(available: {', '.join(servable)})"
            )


def check_queues(queues: Sequence[str]) -> None:
    """``ConfigError`` unless every queue a worker was started for is a kind it can serve."""
    if not queues:
        raise ConfigError(f"no queue given (--queues); choose from {', '.join(QUEUES)}")
    for queue in queues:
        if queue not in QUEUES:
            raise ConfigError(
                f"unknown queue {queue!r} in --queues; choose from {', '.join(QUEUES)}"
            )
        if queue not in WORKER_KINDS:
            raise ConfigError(
                f"--queues {queue}: this build has no {queue} fetcher yet; "
                f"serve {', '.join(WORKER_KINDS)} instead"
            )
