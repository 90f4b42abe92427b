"""What a fetcher may spend and send on one fetch (``HttpFetcher``, ``ImpersonateFetcher``,
``FileFetcher``); ``runtime.options.fetch_options`` builds it from the crawl's settings."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_USER_AGENT = "crawlfleet/0.1 (+https://github.com/crawlfleet/crawlfleet)"


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """Limits, timeouts and identity of the crawl's fetchers; the defaults are ``Settings``'
    (``tests/unit/test_options.py`` keeps them equal).

    ``allow_private_addresses`` turns the address guard off (tests, intranet crawls);
    ``max_idle_per_origin`` is the idle keep-alive connections the HTTP transport keeps to
    one origin (the crawl's ``concurrency``).
    """

    user_agent: str = DEFAULT_USER_AGENT
    allow_private_addresses: bool = False
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    total_timeout_s: float = 60.0
    max_redirects: int = 10
    max_body_bytes: int = 10 * 1024 * 1024
    max_decompressed_bytes: int = 10 * 1024 * 1024
    max_idle_per_origin: int = 16
