"""The start-up check refuses a Redis that can lose a crawl or that anyone may write to."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import Redis

from crawlfleet.errors import StateError
from crawlfleet.frontier.redis.safety import ACCEPT_FLAG, check_redis_safety
from tests.fixtures.redis_server import RedisServer

pytestmark = pytest.mark.redis

NON_LOOPBACK = "192.0.2.2"  # this machine's eth0 address (RFC 5737), reachable locally
Connect = Callable[[RedisServer], Awaitable[Redis]]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    clients: list[Redis] = []

    async def open_client(server: RedisServer) -> Redis:
        client = Redis.from_url(server.url, decode_responses=True)
        clients.append(client)
        return client

    yield open_client
    for client in clients:
        await client.aclose()


async def test_a_safe_server_on_loopback_without_a_password_passes_quietly(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    client = await connect(start_redis(aof=True))
    assert await check_redis_safety(client, accept_unsafe=False) == []


async def test_a_safe_server_with_a_password_gives_no_warning(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    client = await connect(start_redis(aof=True, password="s3cret pw/"))
    assert await check_redis_safety(client, accept_unsafe=False) == []


async def test_no_persistence_is_refused_naming_the_setting_and_the_flag(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    client = await connect(start_redis(aof=False))
    with pytest.raises(StateError) as info:
        await check_redis_safety(client, accept_unsafe=False)
    message = str(info.value)
    assert "\n" not in message
    assert "appendonly is 'no'" in message
    assert ACCEPT_FLAG in message
    assert ACCEPT_FLAG == "--accept-unsafe-redis"


async def test_an_evicting_server_is_refused(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    client = await connect(start_redis(aof=True, maxmemory_policy="allkeys-lru"))
    with pytest.raises(StateError, match="maxmemory-policy is 'allkeys-lru', not 'noeviction'"):
        await check_redis_safety(client, accept_unsafe=False)


async def test_the_flag_turns_refusals_into_warnings(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    client = await connect(start_redis(aof=False, maxmemory_policy="volatile-lru"))
    warnings = await check_redis_safety(client, accept_unsafe=True)
    assert [w for w in warnings if "(accepted)" in w] == [
        w for w in warnings if "appendonly" in w or "maxmemory-policy" in w
    ]
    assert len(warnings) == 2


async def test_no_password_beyond_loopback_is_refused(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    server = start_redis(aof=True, host=NON_LOOPBACK, protected_mode=False)
    client = await connect(server)
    with pytest.raises(StateError, match="without authentication from beyond loopback"):
        await check_redis_safety(client, accept_unsafe=False)
    with_password = start_redis(aof=True, host=NON_LOOPBACK, password="pw")
    assert await check_redis_safety(await connect(with_password), accept_unsafe=False) == []


async def test_a_server_refusing_config_is_a_warning_naming_what_was_not_checked(
    start_redis: Callable[..., RedisServer], connect: Connect
) -> None:
    server = start_redis(aof=True, password="pw", extra_args=("--rename-command", "CONFIG", ""))
    warnings = await check_redis_safety(await connect(server), accept_unsafe=False)
    assert len(warnings) == 1
    assert "refuses CONFIG GET" in warnings[0]
    assert "appendonly" in warnings[0]
    assert "maxmemory-policy" in warnings[0]
