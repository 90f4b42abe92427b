"""The in-memory session store: a dict, for tests and one-process tools."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from crawlfleet.sessions.protocols import StoredSession


class MemorySessionStore:
    """A ``SessionStore`` in a dict."""

    def __init__(self) -> None:
        self._sessions: dict[str, StoredSession] = {}

    async def load(self, domain: str) -> StoredSession | None:
        return self._sessions.get(domain)

    async def save(self, domain: str, cookies: Mapping[str, str]) -> StoredSession:
        stored = StoredSession(dict(cookies), secrets.token_hex(8))
        self._sessions[domain] = stored
        return stored

    async def drop(self, domain: str) -> None:
        self._sessions.pop(domain, None)
