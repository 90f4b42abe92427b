"""The session store port: one cookie jar per login domain, shared by a crawl's processes.

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
