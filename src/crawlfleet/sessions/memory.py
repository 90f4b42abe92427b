"""The in-memory session store: a dict, for tests and one-process tools."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from crawlfleet.sessions.protocols import CrawlSession, StoredSession


class MemorySessionStore:
    """A ``SessionStore`` and ``CrawlSessionStore`` in dicts."""

    def __init__(self) -> None:
        self._sessions: dict[str, StoredSession] = {}
        self._crawl: dict[str, dict[str, CrawlSession]] = {}

    async def load(self, domain: str) -> StoredSession | None:
        return self._sessions.get(domain)

    async def save(self, domain: str, cookies: Mapping[str, str]) -> StoredSession:
        stored = StoredSession(dict(cookies), secrets.token_hex(8))
        self._sessions[domain] = stored
        return stored

    async def drop(self, domain: str) -> None:
        self._sessions.pop(domain, None)

    async def crawl_sessions(self, domain: str) -> list[CrawlSession]:
        return list(self._crawl.get(domain, {}).values())

    async def put(self, session: CrawlSession) -> None:
        self._crawl.setdefault(session.domain, {})[session.id] = session

    async def retire(self, domain: str, session_id: str) -> None:
        self._crawl.get(domain, {}).pop(session_id, None)
