"""The frontier's Redis client packs commands with hiredis, byte for byte as redis-py does."""

from __future__ import annotations

import random

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from crawlfleet.redisdb import connect

ARGS = [0.1, 1e20, -2.5, 1e-7, 1_234_567_890.1234567, float("inf"), 3, -7, 2**63, "é", b"\x00"]


def packers() -> tuple[Connection, Connection]:
    client = connect("redis://127.0.0.1:1/0")  # never connects: only its connection class
    return client.connection_pool.connection_class(), Connection()


def test_commands_pack_as_redis_py_packs_them() -> None:
    fast, plain = packers()
    assert type(fast).__name__ == "HiredisConnection"
    rng = random.Random(7)
    floats = [rng.uniform(-1e12, 1e12) for _ in range(500)]
    floats += [rng.random() * 10 ** rng.randint(-30, 30) for _ in range(500)]
    for arg in [*ARGS, "a b", "", *floats]:
        assert fast.pack_command("EVALSHA", "sha", 1, "k", arg) == [
            b"".join(plain.pack_command("EVALSHA", "sha", 1, "k", arg))
        ]
    assert fast.pack_command("SCRIPT LOAD", "return 1") == [
        b"".join(plain.pack_command("SCRIPT LOAD", "return 1"))
    ]


@pytest.mark.parametrize("arg", [None, True, object()])
def test_what_redis_py_refuses_is_refused_with_its_error(arg: object) -> None:
    fast, _ = packers()
    with pytest.raises(DataError, match="Invalid input of type"):
        fast.pack_command("SET", "k", arg)
