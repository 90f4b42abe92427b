"""The distributed proxy states: the crawl's ``{p}:proxies`` hash (``frontier/redis/keys.py``).

Each change of one proxy is one Lua script over that key (read the record, apply the rule of
``protocols.succeeded`` / ``protocols.penalized``, write it back), so concurrent workers never
lose an update.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from crawlfleet.errors import StateError
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.proxies.protocols import LATENCY_WEIGHT, Cooldown, ProxyState
from crawlfleet.redact import redact

_FIELDS = (
    "successes", "bans", "errors", "strikes", "quarantined_until", "last_used", "latency_s",
    "tier", "label",
)  # fmt: skip
_FRESH = (
    "{successes = 0, bans = 0, errors = 0, strikes = 0, quarantined_until = 0, last_used = 0,"
    " latency_s = 0, tier = 0, label = ''}"
)

REGISTER_LUA = f"""
-- Record a proxy's tier and label, keeping its health.
-- KEYS[1] proxies
-- ARGV[1] proxy id
-- ARGV[2] tier
-- ARGV[3] label (host:port or direct)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local s = raw and cjson.decode(raw) or {_FRESH}
s.tier = tonumber(ARGV[2])
s.label = ARGV[3]
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(s))
return 1
"""

SUCCESS_LUA = f"""
-- Fetches through a proxy were not blocked.
-- KEYS[1] proxies
-- ARGV[1] proxy id
-- ARGV[2] now (epoch s)
-- ARGV[3] latency_s (their mean)
-- ARGV[4] weight of one latency sample
-- ARGV[5] how many fetches
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local s = raw and cjson.decode(raw) or {_FRESH}
local latency = tonumber(ARGV[3])
if s.successes > 0 then
  local w = tonumber(ARGV[4])
  latency = (1 - w) * s.latency_s + w * latency
end
s.successes = s.successes + tonumber(ARGV[5])
s.latency_s = latency
s.last_used = math.max(s.last_used, tonumber(ARGV[2]))
local out = cjson.encode(s)
redis.call('HSET', KEYS[1], ARGV[1], out)
return out
"""

PENALIZE_LUA = f"""
-- A ban signal (ARGV[3] = 0) or a proxy fault (1) through a proxy; quarantine if ARGV[4] = 1.
-- KEYS[1] proxies
-- ARGV[1] proxy id
-- ARGV[2] now (epoch s)
-- ARGV[3] 1 = proxy fault, 0 = ban signal
-- ARGV[4] 1 = quarantine it (unless already quarantined)
-- ARGV[5] cooldown base_s
-- ARGV[6] cooldown max_s
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local s = raw and cjson.decode(raw) or {_FRESH}
local now = tonumber(ARGV[2])
if ARGV[3] == '1' then s.errors = s.errors + 1 else s.bans = s.bans + 1 end
if ARGV[4] == '1' and s.quarantined_until <= now then
  s.strikes = s.strikes + 1
  local cooldown = tonumber(ARGV[5]) * 2 ^ (s.strikes - 1)
  s.quarantined_until = now + math.min(tonumber(ARGV[6]), cooldown)
end
s.last_used = math.max(s.last_used, now)
local out = cjson.encode(s)
redis.call('HSET', KEYS[1], ARGV[1], out)
return out
"""


def _state(proxy: str, raw: bytes | str | None) -> ProxyState:
    if raw is None:
        return ProxyState(proxy)
    data: dict[str, Any] = orjson.loads(raw)
    return ProxyState(
        proxy, int(data["successes"]), int(data["bans"]), int(data["errors"]),
        int(data["strikes"]), float(data["quarantined_until"]), float(data["last_used"]),
        float(data["latency_s"]), int(data.get("tier", 0)), str(data.get("label", "")),
    )  # fmt: skip


class RedisProxyStates:
    """A ``ProxyStateStore`` in one hash: proxy id -> JSON record (``_FIELDS``)."""

    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._key = CrawlKeys(prefix).key("proxies")
        self._success = client.register_script(SUCCESS_LUA)
        self._penalize = client.register_script(PENALIZE_LUA)
        self._register = client.register_script(REGISTER_LUA)

    @classmethod
    def open(cls, url: str, prefix: str) -> RedisProxyStates:
        return cls(Redis.from_url(url, socket_connect_timeout=5), prefix)

    async def register(self, proxy: str, tier: int, label: str) -> None:
        await self._call(self._register, proxy, tier, label)

    async def all(self) -> list[ProxyState]:
        try:
            raws = await self._client.hgetall(self._key)
        except RedisError as exc:
            raise StateError(f"proxy states: {redact(str(exc))}") from None
        found = [_state(_text(proxy), raw) for proxy, raw in raws.items()]
        return sorted(found, key=lambda state: state.id)

    async def load(self, ids: list[str]) -> Mapping[str, ProxyState]:
        if not ids:
            return {}
        try:
            raws = await self._client.hmget(self._key, ids)
        except RedisError as exc:
            raise StateError(f"proxy states: {redact(str(exc))}") from None
        return {proxy: _state(proxy, raw) for proxy, raw in zip(ids, raws, strict=True)}

    async def success(self, proxy: str, now: float, latency_s: float, count: int = 1) -> ProxyState:
        raw = await self._call(
            self._success, proxy, repr(now), repr(latency_s), LATENCY_WEIGHT, count
        )
        return _state(proxy, raw)

    async def penalize(
        self, proxy: str, now: float, *, error: bool, quarantine: bool, cooldown: Cooldown
    ) -> ProxyState:
        raw = await self._call(
            self._penalize, proxy, repr(now), int(error), int(quarantine),
            repr(cooldown.base_s), repr(cooldown.max_s),
        )  # fmt: skip
        return _state(proxy, raw)

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, script: Any, *args: str | int | float) -> bytes:
        try:
            raw: bytes = await script(keys=[self._key], args=list(args))
        except RedisError as exc:
            raise StateError(f"proxy states: {redact(str(exc))}") from None
        return raw


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
