"""Refuse a Redis that can lose a crawl, or that anyone may write to, unless told to accept it.

A distributed crawl lives in Redis only. It is lost when Redis restarts without an
append-only file (``appendonly no``: snapshots alone drop the last minutes), when Redis
evicts keys to free memory (any ``maxmemory-policy`` but ``noeviction``), and it can be
rewritten by anyone who reaches a server that asks for no password: the crawl definition
decides which parser modules every worker imports. A server without a password that only
loopback clients can reach is a warning, not a refusal.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from typing import Any

from redis.asyncio import ConnectionPool, Redis, UnixDomainSocketConnection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, RedisError, ResponseError

from crawlfleet.errors import StateError

ACCEPT_FLAG = "--accept-unsafe-redis"
"""The command-line flag that accepts an unsafe Redis; named in the refusal."""
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")

log = logging.getLogger(__name__)


async def check_redis_safety(client: Redis, *, accept_unsafe: bool) -> list[str]:
    """The warnings about ``client``'s server, one line each; ``StateError`` if it is unsafe.

    Unsafe: ``appendonly`` not ``yes``, ``maxmemory-policy`` not ``noeviction``, or commands
    accepted without authentication from beyond loopback. With ``accept_unsafe`` those come
    back as warnings too. A server that refuses ``CONFIG GET`` (managed services rename it)
    gives a warning saying what could not be checked.
    """
    kwargs = client.connection_pool.connection_kwargs
    where = _where(kwargs)
    unsafe: list[str] = []
    warnings: list[str] = []
    config = await _config(client, ("appendonly", "maxmemory-policy", "bind", "protected-mode"))
    if config is None:
        warnings.append(
            f"Redis at {where} refuses CONFIG GET: its persistence (appendonly) and "
            "maxmemory-policy cannot be checked; make sure they are 'yes' and 'noeviction'"
        )
    else:
        if config.get("appendonly") != "yes":
            unsafe.append(
                f"appendonly is {config.get('appendonly')!r} (a restart of Redis loses the crawl)"
            )
        if config.get("maxmemory-policy") != "noeviction":
            unsafe.append(
                f"maxmemory-policy is {config.get('maxmemory-policy')!r}, not 'noeviction' "
                "(Redis may evict the crawl's keys)"
            )
    if await _answers_without_auth(client):
        local = await _is_loopback(client.connection_pool) and not _exposed(config)
        if local:  # only this machine can reach it: as safe as the machine itself
            log.debug("Redis at %s accepts commands without authentication (loopback only)", where)
        else:
            unsafe.append("it accepts commands without authentication from beyond loopback")
    if unsafe and not accept_unsafe:
        raise StateError(
            f"unsafe Redis at {where}: {'; '.join(unsafe)}; fix it, or pass {ACCEPT_FLAG} "
            "to crawl anyway"
        )
    return [f"unsafe Redis at {where} (accepted): {problem}" for problem in unsafe] + warnings


def _where(kwargs: dict[str, Any]) -> str:
    if "path" in kwargs:
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


async def _config(client: Redis, names: tuple[str, ...]) -> dict[str, str] | None:
    """The settings by name, or None when the server refuses ``CONFIG GET``."""
    try:
        found: dict[str, str] = {}
        for name in names:
            reply = await client.config_get(name)
            found.update({str(k): str(v) for k, v in reply.items()})
    except ResponseError:
        return None
    return found


async def _answers_without_auth(client: Redis) -> bool:
    """Whether a client without username and password may run a command (PING)."""
    pool = client.connection_pool
    kwargs = {
        key: value
        for key, value in pool.connection_kwargs.items()
        if key not in ("username", "password", "credential_provider", "retry")
    }
    probe_pool = ConnectionPool(connection_class=pool.connection_class, **kwargs)
    probe = Redis(connection_pool=probe_pool, retry=Retry(NoBackoff(), retries=0))
    try:
        await probe.ping()
    except (AuthenticationError, ResponseError):
        return False
    except RedisError as exc:
        raise StateError(f"Redis at {_where(kwargs)}: cannot check authentication: {exc}") from None
    finally:
        await probe.aclose()
        await probe_pool.disconnect()
    return True


async def _is_loopback(pool: ConnectionPool) -> bool:
    """Whether the server is reached over a Unix socket or a loopback address only."""
    if issubclass(pool.connection_class, UnixDomainSocketConnection):
        return True
    host = str(pool.connection_kwargs.get("host", "localhost"))
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def _exposed(config: dict[str, str] | None) -> bool:
    """Whether a password-less server also listens beyond loopback without protected mode.

    Unknown (``CONFIG GET`` refused) counts as exposed.
    """
    if config is None:
        return True
    if config.get("protected-mode") == "yes":
        return False  # Redis itself refuses password-less clients from beyond loopback
    addresses = [a.lstrip("-") for a in config.get("bind", "").split()]
    if not addresses:
        return True
    for address in addresses:
        if address.lower() in _LOOPBACK_NAMES:
            continue
        try:
            if not ipaddress.ip_address(address).is_loopback:
                return True
        except ValueError:
            return True
    return False
