"""The session store port: cookie jars shared by a crawl's processes.

Two kinds of jar: one per login domain (``SessionStore``, the ``@login`` steps), and the
crawl sessions of the proxy link (``CrawlSessionStore``: proxy + header profile + cookie
jar, a pool per domain, ``runtime/fetching/session_pool.py``).

Implementations: ``memory.MemorySessionStore`` (tests, one process), ``sqlite.SqliteSessionStore``
(the embedded crawl: a table of its state file), ``redis.RedisSessionStore`` (distributed:
``{p}:sessions``, see ``frontier/redis/keys.py``). One contract suite runs on all three.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A domain's cookies after a login; ``version`` changes with every ``save``.

    A process that finds a page logged out compares the version it used with the stored
    one: another version means another process logged in since, so it takes that jar
    instead of logging in again.
    """

    cookies: Mapping[str, str] = field(default_factory=dict)
    version: str = ""


class SessionStore(Protocol):
    """Cookie jars by login domain (the string of the ``@login`` declaration).

    ``load`` returns None when the domain has no session yet (or it was dropped); ``save``
    replaces the domain's session whole and returns the stored value with its new version;
    ``drop`` forgets it (a missing one is no error). Values are never logged.
    """

    async def load(self, domain: str) -> StoredSession | None: ...

    async def save(self, domain: str, cookies: Mapping[str, str]) -> StoredSession: ...

    async def drop(self, domain: str) -> None: ...


@dataclass(frozen=True, slots=True)
class CrawlSession:
    """One crawl session of a domain: a proxy, a header profile and the cookies it collected.

    ``id`` is random; ``proxy`` is a proxy id (``proxies.endpoints``), ``tier`` its tier,
    ``profile`` a header profile name (``fetchers/profiles.py``), ``epoch`` the domain's
    ``session_epoch`` when it was made (a larger one retires it).
    """

    id: str
    domain: str
    proxy: str
    tier: int
    profile: str
    epoch: int
    cookies: Mapping[str, str] = field(default_factory=dict)


class CrawlSessionStore(Protocol):
    """The crawl sessions of each domain; values (cookies) are never logged.

    ``crawl_sessions`` returns the domain's live sessions (any order; none: empty); ``put``
    adds or replaces one whole (by id); ``retire`` forgets one (a missing one is no error).
    """

    async def crawl_sessions(self, domain: str) -> list[CrawlSession]: ...

    async def put(self, session: CrawlSession) -> None: ...

    async def retire(self, domain: str, session_id: str) -> None: ...
