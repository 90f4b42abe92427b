"""Open a Redis client from a URL: one server, or a Redis Cluster.

URLs:

- ``redis://[user:password@]host:port[/db]``, ``rediss://...`` (TLS), ``unix:///path``: one
  server (``redis.asyncio.Redis``);
- ``redis+cluster://[user:password@]host:port[,host:port...]``, ``rediss+cluster://...``: a
  Redis Cluster (``redis.asyncio.cluster.RedisCluster``) reached through any of the listed
  nodes (the seed nodes; the client learns the others from ``CLUSTER SLOTS``). A database
  number other than 0 is refused: a cluster has only database 0.

Both clients offer the commands the frontier and the runtime use (scripts, single-slot
transactions, ``SCAN`` over every node, multi-key ``UNLINK`` split by slot), so callers
hold a ``RedisClient`` and need not know which one they got. ``open_client`` gives the
frontier's client, checked by a first PING; ``node_clients`` gives one plain client per node,
for what must run on every server (``safety.py``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hiredis
from redis.asyncio import Redis, SSLConnection
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawlfleet.errors import StateError
from crawlfleet.redact import redact
from crawlfleet.redisurl import CLUSTER_SCHEMES, cluster_nodes, is_cluster_url, url_problem

RedisClient = Redis | RedisCluster


def store_retry(url: str) -> Retry:
    """How the frontier's clients retry connection errors: about a second on one server (a
    restart), about 13 s on a cluster, where a failover takes the node timeout plus an
    election and the client refreshes its slot map between tries (decision 0016)."""
    if is_cluster_url(url):
        return Retry(ExponentialBackoff(cap=2.0, base=0.1), retries=10)
    return Retry(ExponentialBackoff(cap=0.25, base=0.01), retries=8)


def connect(url: str, **options: Any) -> RedisClient:
    """A client for ``url`` (see the module doc); ``options`` go to the client (timeouts,
    ``decode_responses``, ``retry``). ``ValueError`` for a URL it cannot use."""
    parts = urlsplit(url)
    if parts.scheme not in CLUSTER_SCHEMES:
        client = Redis.from_url(url, **options)
        pool = client.connection_pool
        pool.connection_class = _hiredis_packing(pool.connection_class)
        return client
    problem = url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    nodes = cluster_nodes(parts)
    first_host, first_port = nodes[0]
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{first_host}:{first_port}" if userinfo else f"{first_host}:{first_port}"
    first = urlunsplit((CLUSTER_SCHEMES[parts.scheme], netloc, "", parts.query, ""))
    options.pop("retry_on_error", None)  # the cluster client retries on moved nodes itself
    seeds = [ClusterNode(host, port) for host, port in nodes[1:]]
    return RedisCluster.from_url(first, startup_nodes=seeds or None, **options)


def _hiredis_packing(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """``base`` packing commands with hiredis, as redis-py's synchronous client does and its
    asyncio one does not: 3.5 µs instead of 34 for a lease end's 40 arguments (decision
    0024). What hiredis refuses goes to redis-py's packer, which raises its own errors."""

    class HiredisPacking(base):  # type: ignore[misc,valid-type]
        def pack_command(self, *args: Any) -> list[bytes]:
            if isinstance(args[0], str):  # 'SCRIPT LOAD' goes as two arguments
                args = (*args[0].encode().split(), *args[1:])
            try:
                return [hiredis.pack_command(args)]
            except TypeError:
                packed: list[bytes] = super().pack_command(*args)
                return packed

    HiredisPacking.__name__ = HiredisPacking.__qualname__ = f"Hiredis{base.__name__}"
    return HiredisPacking


async def open_client(url: str) -> RedisClient:
    """A client for ``url`` (one server or a cluster) that retries connection errors
    (``store_retry``); ``StateError`` (password redacted) when the URL is bad or nothing
    answers a first PING, which is not retried."""
    where = redact(url)
    try:
        probe = connect(url, retry=Retry(NoBackoff(), retries=0), socket_connect_timeout=5)
    except ValueError as exc:
        raise StateError(f"bad Redis URL {where}: {exc}") from None
    try:
        await probe.ping()
    except RedisError as exc:
        raise StateError(f"Redis at {where} failed: {exc}") from exc
    finally:
        await probe.aclose()
    return connect(
        url,
        decode_responses=True,
        retry=store_retry(url),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        socket_connect_timeout=5,
    )


async def node_clients(client: RedisCluster) -> list[Redis]:
    """One plain client per server of a cluster (every primary and replica), with the
    cluster client's credentials and timeouts; the caller closes them."""
    await client.initialize()
    nodes = client.get_nodes()
    given = nodes[0].connection_kwargs if nodes else {}
    kwargs = {
        key: value
        for key, value in given.items()
        if key in _NODE_OPTIONS or (key.startswith("ssl") and key != "ssl_password")
    }
    connection_class = given.get("connection_class")
    if isinstance(connection_class, type) and issubclass(connection_class, SSLConnection):
        kwargs["ssl"] = True
    return [Redis(host=node.host, port=int(node.port), **kwargs) for node in nodes]


_NODE_OPTIONS = (
    "username",
    "password",
    "credential_provider",
    "socket_timeout",
    "socket_connect_timeout",
    "ssl_password",
)
"""What a node's plain client takes from the cluster client (credentials, timeouts, TLS)."""
