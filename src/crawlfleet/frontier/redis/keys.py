"""Every Redis key of one crawl's frontier, and what it holds.

All keys live under the crawl's prefix ``{p}:`` so several crawls share one Redis.

==========================  ======  ===========================================================
key                         type    contents
==========================  ======  ===========================================================
``{p}:config``              HASH    ``dedup``, ``bloom_bits``, ``bloom_hashes``,
                                    ``bloom_shard_bytes`` fixed at the first open; a later
                                    open with other values is refused
``{p}:seen``                SET     every admitted or ``mark_seen`` fingerprint (dedup=exact)
``{p}:bloom:<i>``           STRING  shard ``i`` (from 0) of the Bloom bitmap (dedup=bloom):
                                    ``bloom_shard_bytes`` bytes each, created full size at
                                    open; global bit ``p`` is bit ``p % (8 * bytes)`` of shard
                                    ``p // (8 * bytes)`` (see ``bloom.py``)
``{p}:req``                 HASH    fingerprint -> request JSON, for queued, leased and dead
                                    requests (deleted when done)
``{p}:q:<domain>``          ZSET    one per domain: fingerprints due to be claimed, score
                                    ``-priority * 2**36 + seq`` (priority clamped to
                                    +-65535), so higher priority first, then FIFO
``{p}:delayed``             ZSET    retried fingerprints, score = not-before (epoch s); moved
                                    into their domain queue by the claim that finds them due
``{p}:ready``               ZSET    domain -> ready_at (epoch s), for domains with a non-empty
                                    queue that may be served (below their in-flight limit)
``{p}:parked``              ZSET    domain -> ready_at, for domains with a non-empty queue
                                    found at their in-flight limit; back to ``ready`` when
                                    one of their leases ends
``{p}:next``                HASH    domain -> ready_at (epoch s, ``%.17g``): the last claim
                                    plus the delay, or a block (Retry-After), whichever is
                                    later; absent = 0
``{p}:inflight``            HASH    domain -> number of current leases (absent = 0)
``{p}:policy``              HASH    domain -> ``"<delay_s> <max_in_flight>"`` override
``{p}:leases``              ZSET    lease token -> expires_at (epoch s)
``{p}:lease``               HASH    lease token -> fingerprint
``{p}:dead``                ZSET    dead-lettered fingerprint -> died_at (epoch s)
``{p}:errors``              HASH    fingerprint -> JSON list of error strings (its history)
``{p}:counts``              HASH    ``queued`` (incl. delayed), ``leased``, ``done``,
                                    ``dead``, ``seen``, ``admitted`` (total, for the budget)
``{p}:admitted``            HASH    domain -> requests admitted (per-domain budget)
``{p}:order``               HASH    fingerprint -> its admission ``seq``, for queued, leased
                                    and dead requests: a retried, reaped or requeued request
                                    goes back to its admission place (deleted when done)
``{p}:seq``                 STRING  counter giving queue order and unique lease tokens
==========================  ======  ===========================================================

Lease tokens are ``<fingerprint>.<seq>``. Every multi-key change is one Lua script in
``lua/``; the scripts derive ``{p}:q:<domain>`` from the queue prefix passed as ``ARGV[1]``
and ``{p}:bloom:<i>`` from the name ``{p}:bloom`` (never a key itself) passed as a key, so they
need a single Redis node (not a cluster).
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_KEYS = (
    "config",
    "seen",
    "bloom",
    "req",
    "delayed",
    "ready",
    "parked",
    "next",
    "inflight",
    "policy",
    "leases",
    "lease",
    "dead",
    "errors",
    "counts",
    "admitted",
    "order",
    "seq",
)


@dataclass(frozen=True, slots=True)
class CrawlKeys:
    """The key names of one crawl, from its prefix."""

    prefix: str

    def key(self, name: str) -> str:
        """The full name of one of ``FIXED_KEYS``."""
        if name not in FIXED_KEYS:
            raise KeyError(f"unknown frontier key {name!r}")
        return f"{self.prefix}:{name}"

    @property
    def queue_prefix(self) -> str:
        return f"{self.prefix}:q:"

    def queue(self, domain: str) -> str:
        return f"{self.queue_prefix}{domain}"

    def bloom_shard(self, index: int) -> str:
        return f"{self.key('bloom')}:{index}"

    def all_fixed(self) -> list[str]:
        return [self.key(name) for name in FIXED_KEYS]
