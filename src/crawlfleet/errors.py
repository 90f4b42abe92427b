"""Every exception crawlfleet raises on purpose, in one tree.

    CrawlfleetError
    ├── ConfigError            a setting, config file or parser module is wrong (start-up)
    ├── StateError             the state store (SQLite file, Redis, PostgreSQL) is unusable
    │   ├── FrontierLost       a distributed crawl's frontier vanished while it ran (wiped)
    │   └── NoWorkers          no live worker serves a distributed crawl (dispatcher gives up)
    ├── BadUrl                 a URL cannot be parsed, or its scheme is not http(s)/file
    ├── FetchError             one fetch attempt failed; ``transient`` says if a retry may help
    │   ├── TooLarge           the body passed the size limit (declared, read or decompressed)
    │   ├── ForbiddenAddress   the host resolves to a private/loopback address we may not fetch
    │   ├── BrowserFault       the browser itself failed (crash, launch, pool closed): no
    │   │                      fault of the site or of the proxy the page went through
    │   └── LoginFailed        a login step failed, or a page stayed logged out after it
    ├── ParseError             a fetched page could not be parsed
    │   └── ParseBudgetExceeded  nested too deep, or parsing passed its deadline (parsing.budget)
    └── DropItem               a pipeline processor refuses an item; carries the reason
        └── InvalidItem        the item failed its schema (pipeline.processors); kept as a reject

Responses are never exceptions: a 403, 429 or CAPTCHA page is a ``FetchResult`` that the
crawl step judges (``runtime.step.judge``: ``classify`` and ``judge``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawlfleet.models import Route


class CrawlfleetError(Exception):
    """Base of every error raised by crawlfleet on purpose."""


class ConfigError(CrawlfleetError):
    """A setting, a config file or a parser module is wrong; the message names it."""


class StateError(CrawlfleetError):
    """The state store cannot be used (corrupt, locked, unreachable)."""


class FrontierLost(StateError):
    """The crawl's frontier is gone from its store while the crawl was open.

    Redis was flushed, evicted keys or restarted without persistence: what is queued, leased
    and done is unknown, so the crawl must not be reported complete.
    """


class NoWorkers(StateError):
    """No live worker has served a distributed crawl for ``worker_wait_s``: none runs, none
    consumes its queues, or each refuses it (a parser module it was not started to allow)."""


class BadUrl(CrawlfleetError):
    """A URL cannot be parsed or uses a scheme we do not fetch."""


class FetchError(CrawlfleetError):
    """One fetch attempt failed.

    ``transient`` is True when the same request may succeed later (connect error, timeout,
    5xx, 429); False when retrying is pointless (too large, forbidden address, bad redirect).
    ``route``: the crawl session the attempt went through (the attempt log records it).
    """

    transient: bool = True
    route: Route | None = None
    screenshot: str | None = None
    """Where the browser fetcher saved a picture of the failed page (``browser_screenshots``)."""

    def __init__(self, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        if transient is not None:
            self.transient = transient


class TooLarge(FetchError):
    """The body passed a size limit (declared, read or decompressed)."""

    transient = False


class ForbiddenAddress(FetchError):
    """The host resolves to a private, loopback or link-local address and that is not allowed."""

    transient = False


class BrowserFault(FetchError):
    """The browser failed on this side (a crash, a lost context, no launch, a closed pool).

    Transient; not held against the crawl session's proxy (``runtime/fetching/proxy_link.py``).
    """


class LoginFailed(FetchError):
    """A login step failed, or a page stayed logged out after it; not retried
    (``runtime/fetching/login.py``)."""

    transient = False


class ParseError(CrawlfleetError):
    """A fetched page could not be parsed; the message names the URL."""


class ParseBudgetExceeded(ParseError):
    """The page is nested deeper than allowed, or parsing it passed its deadline."""


class DropItem(CrawlfleetError):
    """Raised by a pipeline processor to refuse an item; the message is the counted reason."""
