"""Where a crawl's frontier keys live: its own slot, its partitions' slots, a domain's partition.

A crawl's own prefix ``crawlfleet:{<crawl_id>}`` holds its whole frontier when it has one
partition, and its crawl-wide keys otherwise; partition ``i`` of a crawl of P > 1 has the
prefix ``crawlfleet:{<crawl_id>:<i>}`` (its own hash tag, so its own Redis Cluster slot). See
``partitioned.py`` and ``keys.py``.
"""

from __future__ import annotations

import hashlib

ROOT = "crawlfleet"


def crawl_prefix(crawl_id: str) -> str:
    """The prefix of a crawl's own slot: ``crawlfleet:{<crawl_id>}``; the whole frontier of a
    one-partition crawl, the crawl-wide keys of a partitioned one."""
    return f"{ROOT}:{{{crawl_id}}}"


def partition_prefix(crawl_id: str, partition: int) -> str:
    """The prefix of partition ``partition`` of a partitioned crawl: its own hash tag."""
    return f"{ROOT}:{{{crawl_id}:{partition}}}"


def partition_of(domain: str, partitions: int) -> int:
    """The partition holding ``domain`` (stable across processes and versions)."""
    digest = hashlib.blake2b(domain.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % partitions
