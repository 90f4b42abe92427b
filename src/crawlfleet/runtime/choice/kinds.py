"""Which fetcher kinds a crawl names, and the start-up check that some runner serves each.

A request's fetcher kind comes from the follow rule (``Follow(fetcher=...)``) that found it,
the parser of its page (``@parser(fetcher=...)``), its domain (``[crawl.domains."HOST"]
fetcher``) or the URL (``file:``); the default is ``http`` (``runtime/choice/routing.py``). A kind
nothing in this build or on this machine can fetch is a configuration error at start, naming
the parser, rule or domain and what is missing, never a silent fallback. ``browser`` is
servable where Playwright is installed and a Chromium found (``browser_executable``);
``auto`` needs both ``http`` and ``browser``.

``impersonate`` (``fetchers/impersonate.py``) is servable when curl_cffi is installed (the
``stealth`` extra). Its requests go to the ``http`` Celery queue: an HTTP worker fetches both
kinds in one process, as it must anyway when a domain's strategy turns its http requests into
impersonated ones (docs/decisions/0018-strategy-ladder.md).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path

from crawlfleet.errors import ConfigError
from crawlfleet.fetchers.browser.launch import browser_missing
from crawlfleet.parsing.plugins import Follow
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.runtime.choice.routing import FetcherOverride

IMPERSONATE = "impersonate"
_IMPERSONATION = (IMPERSONATE,) if find_spec("curl_cffi") is not None else ()

BASE_KINDS = ("http", "file", *_IMPERSONATION)
"""The fetcher kinds the embedded runner always serves."""

QUEUES = ("http", "browser")
"""The Celery queues of the distributed runtime."""

QUEUE_KINDS = {"http": ("http", *_IMPERSONATION), "browser": ("browser",)}
"""The fetcher kinds each Celery queue carries."""

WORKER_KINDS = ("http", *_IMPERSONATION, "browser")
"""The kinds a distributed worker of this build serves (``file:`` URLs are local: embedded)."""

AUTO = "auto"
KNOWN = ("http", "browser", "file", IMPERSONATE, AUTO)


def queue_kinds(queues: Collection[str]) -> frozenset[str]:
    """The fetcher kinds a worker serving ``queues`` claims."""
    return frozenset(kind for queue in queues for kind in QUEUE_KINDS.get(queue, (queue,)))


def named_kinds(
    registry: ParserRegistry, overrides: Mapping[str, FetcherOverride] | None = None
) -> Iterator[tuple[str, str]]:
    """``(kind, where)`` for every fetcher kind a follow rule, parser or domain names.

    ``ConfigError`` for a follow rule naming ``auto`` (what is learned is per parser).
    """
    for spec in registry.specs:
        if spec.fetcher is not None:
            yield spec.fetcher, f"parser {spec.name!r} ({spec.source})"
        rules: Sequence[Follow] = getattr(spec.parse, "follow", ())
        for number, rule in enumerate(rules, 1):
            if rule.fetcher is not None:
                where = f"parser {spec.name!r} ({spec.source}), follow rule {number}"
                if rule.fetcher == AUTO:
                    raise ConfigError(
                        f"{where} names fetcher 'auto': the adaptive fetcher learns per parser;"
                        " give fetcher='auto' to the parser of those pages or to their domain"
                    )
                yield rule.fetcher, where
    for host, override in (overrides or {}).items():
        if override.fetcher is not None:
            yield override.fetcher, f"domain {host!r}"


def servable_kinds(browser_executable: Path) -> tuple[str, ...]:
    """The kinds the embedded runner serves on this machine."""
    if browser_missing(browser_executable) is None:
        return (*BASE_KINDS, "browser", AUTO)
    return BASE_KINDS


def check_kinds(
    named: Iterator[tuple[str, str]] | Sequence[tuple[str, str]],
    servable: Collection[str] = BASE_KINDS,
    *,
    browser_executable: Path | None = None,
) -> None:
    """``ConfigError`` (one line) for the first named kind not in ``servable``.

    A ``browser`` or ``auto`` kind that is not servable names what the machine lacks (with
    ``browser_executable``, the Chromium looked for).
    """
    for kind, where in named:
        if kind in servable:
            continue
        if kind in ("browser", AUTO) and browser_executable is not None:
            missing = browser_missing(browser_executable)
            if missing is not None:
                raise ConfigError(
                    f"{where} names fetcher {kind!r}, which needs a browser: {missing}"
                )
        if kind not in KNOWN:
            raise ConfigError(
                f"{where} names fetcher {kind!r}, which is not a fetcher kind "
                f"(one of {', '.join(KNOWN)})"
            )
        raise ConfigError(
            f"{where} names fetcher {kind!r}, which no runner of this build serves "
            f"(available: {', '.join(servable)})"
        )


def needs_browser(named: Iterator[tuple[str, str]] | Sequence[tuple[str, str]]) -> bool:
    """Whether any named kind fetches with the browser (``browser`` or ``auto``)."""
    return any(kind in ("browser", AUTO) for kind, _ in named)


def check_queues(queues: Sequence[str], browser_executable: Path | None = None) -> None:
    """``ConfigError`` unless every queue a worker was started for is a kind it can serve.

    ``browser`` needs Playwright and a Chromium at ``browser_executable`` (when given).
    """
    if not queues:
        raise ConfigError(f"no queue given (--queues); choose from {', '.join(QUEUES)}")
    for queue in queues:
        if queue not in QUEUES:
            raise ConfigError(
                f"unknown queue {queue!r} in --queues; choose from {', '.join(QUEUES)}"
            )
        if queue == "browser" and browser_executable is not None:
            missing = browser_missing(browser_executable)
            if missing is not None:
                raise ConfigError(f"--queues browser: {missing}")
