"""The wrappers around a crawl's HTTP fetcher, in the order a request passes them.

Top to bottom (a request goes down, its response comes back up)::

    hooks            the crawl's request/response hooks (fetchers/hooks.py), in their order
    cache            --http-cache: answer from disk, store what comes back (fetchers/cache.py)
    login session    the domain's cookies; logs in first and again when logged out (login.py)
    crawl session    [crawl.proxies]: proxy + header profile + cookie jar of the domain's
                     tier (session_pool.py), quarantine of banned proxies (proxy_link.py)
    HttpFetcher      the network (the ``impersonate`` kind: ImpersonateFetcher, the same chain)

Hooks see every request and response, replayed or not; the cache is keyed on the request
as the hooks left it and stores a response after the login step made it a logged-in one,
so a replayed crawl logs in no more than it fetches. ``file:`` requests skip the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import TypeVar

from crawlfleet.clock import Clock
from crawlfleet.fetchers.cache import (
    CachePolicy,
    CachingFetcher,
    ResponseCache,
    cache_policy,
)
from crawlfleet.fetchers.hooks import HookedFetcher, load_hooks
from crawlfleet.fetchers.profiles import profile
from crawlfleet.fetchers.protocols import Fetcher, ViaFetcher
from crawlfleet.frontier.frontier import Frontier
from crawlfleet.frontier.store_types import Signal
from crawlfleet.models import FetchResult
from crawlfleet.parsing.login import load_logins
from crawlfleet.proxies.endpoints import load_tiers
from crawlfleet.proxies.pool import ProxyPool
from crawlfleet.proxies.protocols import Cooldown, ProxyStateStore
from crawlfleet.runtime.backends import open_proxy_stores, open_session_store
from crawlfleet.runtime.fetching.login import LoginFetcher, check_logins
from crawlfleet.runtime.fetching.proxy_link import SessionFetcher
from crawlfleet.runtime.fetching.session_pool import SessionOptions, SessionPool
from crawlfleet.runtime.step.judge import RETRIED_REFUSALS, StatusClass, classify, judge
from crawlfleet.secretsfile import SiteSecrets
from crawlfleet.settings import Settings
from crawlfleet.settings.proxies import ProxySettings

F = TypeVar("F", bound=Fetcher)


def retried(result: FetchResult) -> bool:
    """Whether the crawl step would fetch ``result``'s request again (status, block page or
    a refusal it retries)."""
    if classify(result) in (StatusClass.TRANSIENT, StatusClass.RETRY_AFTER):
        return True
    if result.status in RETRIED_REFUSALS:
        return True
    signal, _ = judge(result)
    return signal is Signal.BLOCK


def response_cache(settings: Settings, clock: Clock) -> tuple[ResponseCache, CachePolicy] | None:
    """The crawl's HTTP cache and what it keeps, or None without ``http_cache_dir``."""
    if settings.http_cache_dir is None:
        return None
    cache = ResponseCache(
        settings.http_cache_dir, clock=clock, expiry_s=settings.http_cache_expiry_s
    )
    return cache, cache_policy(only_200=settings.http_cache_only_200, retried=retried)


async def login_link(
    settings: Settings, clock: Clock, stack: AsyncExitStack, secrets: SiteSecrets
) -> Callable[[Fetcher], Fetcher]:
    """What puts a fetcher behind the crawl's ``@login`` steps (none: nothing).

    ``ConfigError`` for a login domain without secrets, before anything is fetched.
    """
    logins = load_logins(settings.parsers)
    if not logins:
        return lambda fetcher: fetcher
    check_logins(logins, secrets)
    store = await open_session_store(settings, stack)
    return lambda fetcher: LoginFetcher(fetcher, logins, store, secrets, clock)


def hooked(fetcher: Fetcher, settings: Settings) -> Fetcher:
    """``fetcher`` behind the crawl's request/response hooks (none: ``fetcher`` itself)."""
    hooks = load_hooks(settings.hooks)
    return HookedFetcher(fetcher, hooks) if hooks else fetcher


def cached(fetcher: F, settings: Settings, clock: Clock) -> F | CachingFetcher:
    """``fetcher`` behind the crawl's HTTP cache, or ``fetcher`` itself without one."""
    found = response_cache(settings, clock)
    if found is None:
        return fetcher
    cache, keep = found
    return CachingFetcher(fetcher, cache, keep)


class FrontierStrategy:
    """The domain strategy slot read and written through the crawl's ``Frontier``."""

    def __init__(self, frontier: Frontier) -> None:
        self._frontier = frontier

    async def read(self, domain: str) -> Mapping[str, str]:
        return (await self._frontier.domain(domain)).strategy

    async def write(self, domain: str, strategy: Mapping[str, str]) -> None:
        await self._frontier.set_strategy(domain, strategy)


def proxy_pool(settings: Settings, clock: Clock, states: ProxyStateStore) -> ProxyPool | None:
    """The crawl's proxy pool over ``states``, or None without ``[crawl.proxies]``."""
    config = settings.proxies
    if config is None:
        return None
    return ProxyPool(
        load_tiers(config.tiers, config.file),
        states,
        clock,
        rotation=config.rotation,
        cooldown=Cooldown(config.cooldown_s, config.max_cooldown_s),
    )


def session_options(proxies: ProxySettings) -> SessionOptions:
    """The crawl sessions' rules from ``[crawl.proxies]``."""
    return SessionOptions(
        sessions_per_domain=proxies.sessions_per_domain,
        profiles=tuple(proxies.profiles),
        max_wait_s=proxies.max_wait_s,
        ban_after=proxies.ban_after,
    )


class SessionLink:
    """Puts a ``ViaFetcher`` behind the crawl's sessions; every fetcher it wraps (HTTP,
    impersonate, browser) shares one proxy pool and one session pool."""

    def __init__(
        self, pool: ProxyPool, sessions: SessionPool, clock: Clock, options: SessionOptions
    ) -> None:
        self.pool = pool
        self._sessions = sessions
        self._clock = clock
        self._options = options

    def __call__(self, fetcher: ViaFetcher, *, own_jar: bool = False) -> SessionFetcher:
        """``fetcher`` through the sessions; ``own_jar``: it keeps the jar itself (browser)."""
        return SessionFetcher(
            fetcher, self.pool, self._sessions, self._clock, self._options, own_jar=own_jar
        )


async def session_link(
    settings: Settings, clock: Clock, stack: AsyncExitStack, frontier: Frontier
) -> SessionLink | None:
    """What sends a fetcher's requests through crawl sessions (None without proxies).

    ``ConfigError`` for a bad tier or proxies file, before anything is fetched.
    """
    config = settings.proxies
    if config is None:
        return None
    load_tiers(config.tiers, config.file)  # a bad config fails before any store is opened
    for name in config.profiles:
        profile(name)
    states, sessions = await open_proxy_stores(settings, stack)
    pool = proxy_pool(settings, clock, states)
    assert pool is not None  # config is set
    await pool.register()
    stack.push_async_callback(pool.flush)  # before the stores close (the stack runs LIFO)
    options = session_options(config)
    taken = SessionPool(pool, sessions, FrontierStrategy(frontier), clock, options)
    return SessionLink(pool, taken, clock, options)
