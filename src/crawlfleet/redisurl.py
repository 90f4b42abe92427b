"""Check a Redis URL without importing redis: one server, or a Redis Cluster's seed nodes.

``redis://``, ``rediss://`` and ``unix://`` name one server; ``redis+cluster://`` and
``rediss+cluster://`` name a Redis Cluster by one or more of its nodes,
``redis+cluster://[user:password@]host:port,host:port`` (``redisdb.py``
opens both kinds).
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from crawlfleet.errors import ConfigError

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES)


def is_cluster_url(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a Redis server or cluster, or None; never echoes it."""
    try:
        parts = urlsplit(url)
        if parts.scheme in CLUSTER_SCHEMES:
            if not cluster_nodes(parts):
                return "a redis+cluster:// URL names at least one host:port"
            if parts.path.strip("/") not in ("", "0"):
                return "a Redis Cluster has database 0 only (drop the /N of the URL)"
        else:
            parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        return f"not a usable URL ({exc})"
    if parts.scheme not in SCHEMES:
        return "must start with redis://, rediss://, unix://, redis+cluster:// or rediss+cluster://"
    return None


def cluster_nodes(parts: SplitResult) -> list[tuple[str, int]]:
    """The ``host:port`` seed nodes of a cluster URL, in order; ``ValueError`` on a bad one."""
    hosts = parts.netloc.rpartition("@")[2]
    nodes = []
    for item in hosts.split(","):
        if not item:
            continue
        one = urlsplit(f"//{item}")
        if not one.hostname or one.port is None:
            raise ValueError(f"{item!r} is not host:port")
        nodes.append((one.hostname, one.port))
    return nodes


def check_redis_url(url: str, option: str = "--redis") -> str:
    """``url`` if it can be a Redis URL; else a ``ConfigError`` naming ``option``."""
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(f"bad {option}: {problem}")
    return url
