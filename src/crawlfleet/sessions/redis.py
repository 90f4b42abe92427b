"""The distributed session store: the crawl's ``{p}:sessions`` and ``{p}:jars`` hashes.

See ``frontier/redis/keys.py``. A crawl session is one field of ``{p}:jars``
(``<domain> <id>``): one command changes it, no script is needed.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

import orjson
from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.redact import redact
from crawlfleet.redisdb import RedisClient, connect
from crawlfleet.sessions.protocols import CrawlSession, StoredSession


class RedisSessionStore:
    """A ``SessionStore`` in one hash: login domain -> ``{"cookies": {...}, "version": ...}``."""

    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._key = CrawlKeys(prefix).key("sessions")
        self._jars = CrawlKeys(prefix).key("jars")

    @classmethod
    def open(cls, url: str, prefix: str) -> RedisSessionStore:
        return cls(connect(url, socket_connect_timeout=5), prefix)

    async def load(self, domain: str) -> StoredSession | None:
        try:
            raw = await self._client.hget(self._key, domain)
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None
        if raw is None:
            return None
        data = orjson.loads(raw)
        return StoredSession(data["cookies"], data["version"])

    async def save(self, domain: str, cookies: Mapping[str, str]) -> StoredSession:
        stored = StoredSession(dict(cookies), secrets.token_hex(8))
        value = orjson.dumps({"cookies": dict(cookies), "version": stored.version})
        try:
            await self._client.hset(self._key, domain, value)
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None
        return stored

    async def drop(self, domain: str) -> None:
        try:
            await self._client.hdel(self._key, domain)
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None

    async def crawl_sessions(self, domain: str) -> list[CrawlSession]:
        sessions: list[CrawlSession] = []
        try:
            async for _field, raw in self._client.hscan_iter(
                self._jars, match=f"{_glob(domain)} *"
            ):
                data = orjson.loads(raw)
                sessions.append(CrawlSession(**data))
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None
        return sessions

    async def put(self, session: CrawlSession) -> None:
        value = orjson.dumps({
            "id": session.id, "domain": session.domain, "proxy": session.proxy,
            "tier": session.tier, "profile": session.profile, "epoch": session.epoch,
            "cookies": dict(session.cookies),
        })  # fmt: skip
        try:
            await self._client.hset(self._jars, f"{session.domain} {session.id}", value)
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None

    async def retire(self, domain: str, session_id: str) -> None:
        try:
            await self._client.hdel(self._jars, f"{domain} {session_id}")
        except RedisError as exc:
            raise StateError(f"session store: {redact(str(exc))}") from None

    async def close(self) -> None:
        await self._client.aclose()


def _glob(text: str) -> str:
    """``text`` with the glob characters of a ``MATCH`` pattern escaped."""
    return "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in text)
