"""robots.txt: fetched once per origin, cached with a TTL, read by ``frontier.robots_txt``.

What a fetch outcome means (RFC 9309 section 2.3.1):

- 2xx: the file is read, the first ``max_bytes`` only (default ``ROBOTS_MAX_BYTES``,
  RFC 9309 section 2.5: at least 500 KiB). The fetch function follows redirects (at least
  five hops, across hosts too: RFC 9309 section 2.3.1.2) and the rules found apply to the
  origin asked for. It should read no more than ``max_bytes`` and return it, not fail on a
  larger file (``HttpFetcher.fetch(..., truncate_at_bytes=ROBOTS_MAX_BYTES)``): a 20 MB
  robots.txt is then read up to its cut, not taken for an unreachable one.
- 3xx left unfollowed and 4xx other than 429: no usable file, everything is allowed.
- 429, 5xx or a ``FetchError`` (no answer, a redirect loop or a longer chain than the fetch
  function follows): the file is unreachable, everything is disallowed for ``error_ttl_s``;
  if an earlier copy of the file was read, that copy is used instead.

Each rule is matched against the URL's request target as it will be sent (``request_target``,
the fetcher's own function when wired), never a normalized form of it. Every read of a file
(2xx or 4xx) is told to ``on_read`` with its ``Crawl-delay`` (None without one), so that a
changed robots.txt changes the domain's delay (``Frontier.robots_delay``).

Concurrent checks for one origin wait on a single fetch. At most ``max_hosts`` origins are
kept, least recently used first out.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from crawlfleet.clock import Clock
from crawlfleet.errors import BadUrl, ConfigError, FetchError, ForbiddenAddress
from crawlfleet.frontier.robots_txt import RobotsRules, parse_robots, path_and_query, valid_token
from crawlfleet.models import FetchResult
from crawlfleet.urls import plain_origin

FetchFn = Callable[[str], Awaitable[FetchResult]]
"""Fetches an absolute URL: a ``FetchResult`` for any HTTP status, ``FetchError`` without one."""
ReadFn = Callable[[str, float | None], Awaitable[None]]
"""Told each read of an origin's robots.txt: the origin and its Crawl-delay (None: none)."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
ROBOTS_MAX_BYTES = 512 * 1024
_COMPATIBLE = re.compile(r"compatible\s*;\s*([A-Za-z_-]+)", re.IGNORECASE)
_FIRST_NAME = re.compile(r"\s*([A-Za-z_-]+)")


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    """Whether robots.txt lets us fetch a URL; ``reason`` says why not.

    ``unavailable``: refused only because robots.txt could not be read (5xx, timeout, no
    connection); the URL should be tried again later, not skipped for good. ``transient``
    False: trying again cannot help (the host's address is refused by the address guard), so
    the URL goes to the dead-letter queue at once, under the guard's own error.
    """

    allowed: bool
    reason: str | None = None
    crawl_delay_s: float | None = None
    unavailable: bool = False
    transient: bool = True


ALWAYS_ALLOWED = RobotsDecision(allowed=True)


def product_token(user_agent: str, robots_token: str | None = None) -> str:
    """The name robots.txt groups address us by, lower case.

    ``robots_token`` when given; else the crawler named in a browser-like User-Agent
    (``Mozilla/5.0 (compatible; crawlfleet/0.1)`` -> ``crawlfleet``); else the User-Agent's
    first product (``crawlfleet/0.1 (+https://…)`` -> ``crawlfleet``), read as Google reads
    a group's name: up to the first character outside ``[A-Za-z_-]``. ``ConfigError`` for
    a token that is not such a name, or a browser's User-Agent that names no crawler.
    """
    if robots_token is not None:
        if not valid_token(robots_token):
            raise ConfigError(
                f"bad setting 'robots_token': {robots_token!r} is not a product token "
                "(letters, '_' and '-' only)"
            )
        return robots_token.lower()
    compatible = _COMPATIBLE.search(user_agent)
    if compatible is not None:
        return compatible.group(1).lower()
    first = _FIRST_NAME.match(user_agent)
    if first is None or first.group(1).lower() == "mozilla":
        raise ConfigError(
            f"user_agent {user_agent!r} names no crawler for robots.txt to address: set "
            "'robots_token', or send 'compatible; NAME/version' in it"
        )
    return first.group(1).lower()


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an http(s) URL, lower case, default port dropped."""
    plain = plain_origin(url)
    if plain is not None:
        scheme, host, port = plain
    else:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise BadUrl(f"malformed URL {url!r}: {exc}") from None
        scheme = parts.scheme.lower()
        host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise BadUrl(f"no robots.txt for {url!r} (only http(s) URLs with a host have one)")
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


class _Entry:
    """One origin's cached robots.txt outcome, with its two possible decisions built once.

    Without ``rules`` the outcome is the same for every URL: ``permitted`` is that decision.
    """

    __slots__ = ("expires_at", "permitted", "refused", "rules")

    def __init__(self, rules: RobotsRules | None, expires_at: float) -> None:
        self.rules = rules
        self.expires_at = expires_at
        delay_s = rules.crawl_delay_s if rules is not None else None
        self.permitted = RobotsDecision(allowed=True, crawl_delay_s=delay_s)
        self.refused = RobotsDecision(False, "disallowed by robots.txt", delay_s)

    @classmethod
    def fixed(cls, decision: RobotsDecision, expires_at: float) -> _Entry:
        entry = cls(None, expires_at)
        entry.permitted = decision
        return entry

    @property
    def sitemaps(self) -> list[str]:
        return self.rules.sitemaps if self.rules is not None else []


class RobotsCache:
    """Answers "may we fetch this URL?" from each origin's robots.txt, fetched on demand."""

    def __init__(
        self,
        fetch: FetchFn,
        *,
        user_agent: str,
        clock: Clock,
        ttl_s: float,
        error_ttl_s: float,
        robots_token: str | None = None,
        request_target: Callable[[str], str] = path_and_query,
        on_read: ReadFn | None = None,
        max_bytes: int = ROBOTS_MAX_BYTES,
        max_hosts: int = 10_000,
    ) -> None:
        """``user_agent`` and ``robots_token``: see ``product_token`` (``ConfigError``)."""
        if ttl_s <= 0 or error_ttl_s <= 0:
            raise ValueError("ttl_s and error_ttl_s must be positive")
        if max_bytes <= 0 or max_hosts <= 0:
            raise ValueError("max_bytes and max_hosts must be positive")
        self._fetch = fetch
        self._token = product_token(user_agent, robots_token)
        self._target = request_target
        self._on_read = on_read
        self._clock = clock
        self._ttl_s = ttl_s
        self._error_ttl_s = error_ttl_s
        self._max_bytes = max_bytes
        self._max_hosts = max_hosts
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._loading: dict[str, asyncio.Task[_Entry]] = {}

    async def check(self, url: str) -> RobotsDecision:
        """The decision for an absolute URL; file: URLs are always allowed.

        Raises ``BadUrl`` for other schemes. Never raises ``FetchError``: an unreachable
        robots.txt is a "disallowed" decision with the reason.
        """
        if url.startswith("file:"):
            return ALWAYS_ALLOWED
        entry = await self._entry(origin_of(url))
        if entry.rules is None or entry.rules.allowed(self._target(url)):
            return entry.permitted
        return entry.refused

    async def sitemaps(self, url: str) -> list[str]:
        """The ``Sitemap:`` URLs in the robots.txt of the URL's origin (maybe none)."""
        if url.startswith("file:"):
            return []
        entry = await self._entry(origin_of(url))
        return list(entry.sitemaps)

    async def _entry(self, origin: str) -> _Entry:
        entry = self._entries.get(origin)
        if entry is not None and entry.expires_at > self._clock.now():
            self._entries.move_to_end(origin)
            return entry
        task = self._loading.get(origin)
        if task is None:
            task = asyncio.ensure_future(self._load(origin, stale=entry))
            self._loading[origin] = task
            task.add_done_callback(lambda _: self._loading.pop(origin, None))
        # Shielded: a cancelled caller must not cancel the fetch the other callers wait on.
        return await asyncio.shield(task)

    async def _load(self, origin: str, *, stale: _Entry | None) -> _Entry:
        entry, read = await self._fetch_entry(origin, stale)
        if read and self._on_read is not None:
            # Before any caller hears the decision: its Crawl-delay is in force first.
            await self._on_read(origin, entry.permitted.crawl_delay_s)
        self._entries[origin] = entry
        self._entries.move_to_end(origin)
        while len(self._entries) > self._max_hosts:
            self._entries.popitem(last=False)
        return entry

    async def _fetch_entry(self, origin: str, stale: _Entry | None) -> tuple[_Entry, bool]:
        """The origin's new entry, and whether a file was read (not kept from before)."""
        robots_url = f"{origin}/robots.txt"
        try:
            result = await self._fetch(robots_url)
        except ForbiddenAddress as exc:  # the page would be refused too: say why, not "robots"
            refused = RobotsDecision(
                allowed=False, reason=f"{robots_url}: {exc}", unavailable=True, transient=False
            )
            return _Entry.fixed(refused, self._clock.now() + self._error_ttl_s), False
        except FetchError as exc:
            return self._unreachable(f"robots.txt unavailable ({exc})", stale), False
        now = self._clock.now()
        status = result.status
        if 200 <= status < 300:
            return _Entry(self._parse(result.body), now + self._ttl_s), True
        if status == 429 or status >= 500:
            return self._unreachable(f"robots.txt unavailable ({status})", stale), False
        return _Entry.fixed(ALWAYS_ALLOWED, now + self._ttl_s), True

    def _unreachable(self, reason: str, stale: _Entry | None) -> _Entry:
        expires_at = self._clock.now() + self._error_ttl_s
        if stale is not None and stale.rules is not None:
            return _Entry(stale.rules, expires_at)
        return _Entry.fixed(
            RobotsDecision(allowed=False, reason=reason, unavailable=True), expires_at
        )

    def _parse(self, body: bytes) -> RobotsRules:
        if len(body) >= self._max_bytes:
            # Maybe cut by the fetcher: drop the last line, half a rule may mean another rule.
            body = body[: self._max_bytes].rpartition(b"\n")[0]
        return parse_robots(body, self._token)
