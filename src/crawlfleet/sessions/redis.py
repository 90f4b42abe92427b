"""The distributed session store: the crawl's ``{p}:sessions`` hash (``frontier/redis/keys.py``)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

import orjson
from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.frontier.redis.connection import RedisClient, connect
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.redact import redact
from crawlfleet.sessions.protocols import StoredSession


class RedisSessionStore:
    """A ``SessionStore`` in one hash: login domain -> ``{"cookies": {...}, "version": ...}``."""

    def __init__(self, client: RedisClient, prefix: str) -> None:
        self._client = client
        self._key = CrawlKeys(prefix).key("sessions")

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

    async def close(self) -> None:
        await self._client.aclose()
