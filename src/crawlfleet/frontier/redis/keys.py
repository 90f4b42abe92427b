"""Every Redis key of one crawl's frontier, and what it holds.

All keys live under the crawl's prefix ``{p}:``, which carries a Redis Cluster hash tag
(``crawlfleet:{<crawl_id>}``; a prefix without one is wrapped whole in braces), so every key
of a crawl hashes to one slot and each Lua script stays single-slot on a cluster. Several
crawls share one Redis.

A crawl created with P > 1 frontier partitions (``partitioned.py``) has P such frontiers,
prefixes ``crawlfleet:{<crawl_id>:<i>}`` for i in 0..P-1, each in its own slot, holding the
domains ``partition_of`` routes to it; its own prefix ``crawlfleet:{<crawl_id>}`` then holds
only the crawl-wide keys ``partitions``, ``epoch``, ``budget``, ``control``, ``sessions``,
``jars`` and ``proxies``.
A one-partition crawl keeps everything under ``crawlfleet:{<crawl_id>}`` (and ``budget`` is
not used: ``counts.admitted`` is the budget).

==============================  ======  =======================================================
key                             type    contents
==============================  ======  =======================================================
``{p}:config``                  HASH    ``dedup``, ``bloom_bits``, ``bloom_hashes``,
                                        ``bloom_shard_bytes`` fixed at the first open; a later
                                        open with other values is refused
``{p}:epoch``                   STRING  a random token written by the first open: missing
                                        while the crawl is open means the frontier was lost
                                        (FLUSHALL, a restart without persistence)
``{p}:started_at``              STRING  epoch seconds the crawl started (``start``), set once
``{p}:seen``                    SET     every admitted fingerprint (dedup=exact)
``{p}:bloom:<i>``               STRING  shard ``i`` (from 0) of the Bloom bitmap (dedup=bloom):
                                        ``bloom_shard_bytes`` bytes each, created full size at
                                        open; global bit ``p`` is bit ``p % (8 * bytes)`` of
                                        shard ``p // (8 * bytes)`` (see ``bloom.py``)
``{p}:req``                     HASH    fingerprint -> request JSON, for queued, leased and
                                        dead requests (deleted when done); its ``data``
                                        and ``headers`` are JSON text (``views.dumps``)
``{p}:q:<kind>:<domain>``       ZSET    one lane per (fetcher kind, domain): fingerprints due
                                        to be claimed, score ``-priority * 2**36 + seq``
                                        (priority clamped to +-65535): higher priority first,
                                        then FIFO
``{p}:delayed:<kind>``          ZSET    retried fingerprints of that kind, score = not-before
                                        (epoch s); moved into their lane by a claim of that
                                        kind that finds them due
``{p}:ready:<kind>``            ZSET    domain -> when its lane of that kind may be served:
                                        its ``ready_at``, or the not-before of the retry that
                                        refilled the lane if later; for domains whose lane of
                                        that kind is not empty and that are not parked
``{p}:parked``                  SET     domains with queued work found or left at their
                                        in-flight limit by a claim, in no ``ready`` index
                                        until one of their leases ends or their policy
                                        changes (``set_delay``, ``set_concurrency``)
``{p}:kinds``                   SET     every fetcher kind that ever had a lane
``{p}:domain:<domain>``         HASH    the domain's politeness and policy (absent field =
                                        default): ``ready_at`` (``%.17g``), ``inflight``,
                                        ``queued`` (incl. delayed retries), ``delay`` (base
                                        delay_s) and ``source``, ``max`` (max_in_flight),
                                        ``level``, ``window`` (``b``/``o``/a refused
                                        URL's kind mark per judged response, oldest
                                        first: ``policy.window_mark``), ``streak``, ``cooldown``
                                        (until), ``reason`` (block reason), ``retry_until``
                                        (Retry-After), ``strategy`` (JSON object of
                                        strings: ``rung``, ``fetcher``, ``tier``,
                                        ``session_epoch``, ...; ``frontier/ladder.py``),
                                        ``drift`` (JSON object: parser -> its drift
                                        test, ``frontier/drift.py``; ``drift.lua``)
``{p}:stats``                   HASH    counter name -> value (``crawlfleet.counters``,
                                        ``%.17g``), the crawl's
``{p}:dstats:<domain>``         HASH    counter name -> value, one domain
``{p}:attempts``                LIST    attempt JSON, oldest first, until copied and acked
                                        (``pending_attempts`` / ``ack_attempts``)
``{p}:leases``                  ZSET    lease token -> expires_at (epoch s), moved later
                                        by ``renew`` while the lease's step runs
``{p}:lease``                   HASH    lease token -> fingerprint
``{p}:dead``                    ZSET    ``<seq>:<fingerprint>`` -> died_at (epoch s) of each
                                        dead letter; ``seq`` is its admission seq in 16
                                        digits, so equal deaths sort in admission order
``{p}:errors``                  HASH    fingerprint -> JSON list of error strings (history)
``{p}:counts``                  HASH    ``queued`` (incl. delayed), ``leased``, ``done``,
                                        ``dead``, ``seen``, ``admitted`` (total, budget);
                                        created by the first open, so missing = lost
``{p}:admitted``                ZSET    domain -> minus its requests admitted (budget), so
                                        ``ZRANGE`` lists the most first, ties by name; a
                                        domain given a policy or counters (``add_counters``)
                                        before any request has 0
``{p}:order``                   HASH    fingerprint -> its admission ``seq``, for queued,
                                        leased and dead requests: a retried, reaped or
                                        requeued request goes back to its admission place
``{p}:seq``                     STRING  counter giving queue order and unique lease tokens
``{p}:control``                 STRING  what the operator asked (``runtime/control.py``):
                                        ``paused`` or ``cancelled``; absent = running.
                                        Read by the dispatcher and workers, never by a script
``{p}:known``                   HASH    fingerprint -> JSON ``{"request": <request JSON>,
                                        "visit": <store_types.Visit as JSON>}`` of every
                                        URL fetched (``remember``); its request is kept
                                        here since ``req`` forgets done requests
``{p}:revisit``                 ZSET    fingerprint -> when the known URL is due again
                                        (epoch s); ``revisit`` moves due done requests back
                                        to their lanes and removes them from here
``{p}:partitions``              STRING  the crawl's frontier partition count P, set by its
                                        first open (``crawl_store.py``), in the crawl's own
                                        prefix; an open asking for another count is refused
``{p}:budget``                  STRING  admissions reserved against ``max_total`` over every
                                        partition (P > 1 only, crawl's own prefix,
                                        ``reserve.lua``)
``{p}:sessions``                HASH    login domain -> JSON ``{"cookies": {name: value},
                                        "version": token}``: the cookie jar of its last login
                                        (``crawlfleet.sessions.redis``), never logged
``{p}:jars``                    HASH    ``<domain> <session id>`` -> JSON crawl session
                                        (``sessions.protocols.CrawlSession``: proxy, tier,
                                        header profile, epoch, cookies), never logged
``{p}:proxies``                 HASH    proxy id -> JSON health record (``successes``,
                                        ``bans``, ``errors``, ``strikes``,
                                        ``quarantined_until``, ``last_used``, ``latency_s``;
                                        ``crawlfleet.proxies.redis``), changed by one Lua
                                        script each; no URL, no credentials
==============================  ======  =======================================================

Lease tokens are ``<fingerprint>.<seq>``. Every multi-key change is one Lua script in
``lua/``. The names of the key families (``q``, ``delayed``, ``ready``, ``domain``,
``dstats``, ``bloom``) are passed to the scripts as keys although no such key exists; the
scripts derive the real keys from them (``{p}:q`` .. ``:http:example.com``), which stay in
the crawl's slot because they share the prefix and its hash tag.
"""

from __future__ import annotations

from dataclasses import dataclass

FIXED_KEYS = (
    "config",
    "epoch",
    "started_at",
    "seen",
    "req",
    "parked",
    "kinds",
    "stats",
    "attempts",
    "leases",
    "lease",
    "dead",
    "errors",
    "counts",
    "admitted",
    "order",
    "seq",
    "control",
    "sessions",
    "jars",
    "proxies",
    "known",
    "revisit",
    "partitions",
    "budget",
)
FAMILIES = ("bloom", "q", "delayed", "ready", "domain", "dstats")
"""Names of key families: ``{p}:<family>:<suffix>``; the bare name is never a key itself."""
NAMES = FIXED_KEYS + FAMILIES


def hash_tag(key: str) -> str | None:
    """The Redis Cluster hash tag of ``key`` (what the slot is computed from), if it has one."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    return key[start + 1 : end] if end > start + 1 else None


def tagged(prefix: str) -> str:
    """``prefix`` if it carries a hash tag, else the prefix wrapped whole in braces."""
    return prefix if hash_tag(prefix) is not None else f"{{{prefix}}}"


@dataclass(frozen=True, slots=True)
class CrawlKeys:
    """The key names of one crawl, from its prefix (tagged with ``tagged`` when built)."""

    prefix: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", tagged(self.prefix))

    def key(self, name: str) -> str:
        """The full name of one of ``FIXED_KEYS``, or of a family (``FAMILIES``)."""
        if name not in NAMES:
            raise KeyError(f"unknown frontier key {name!r}")
        return f"{self.prefix}:{name}"

    def lane(self, kind: str, domain: str) -> str:
        return f"{self.key('q')}:{kind}:{domain}"

    def ready(self, kind: str) -> str:
        return f"{self.key('ready')}:{kind}"

    def delayed(self, kind: str) -> str:
        return f"{self.key('delayed')}:{kind}"

    def domain(self, domain: str) -> str:
        return f"{self.key('domain')}:{domain}"

    def domain_stats(self, domain: str) -> str:
        return f"{self.key('dstats')}:{domain}"

    def bloom_shard(self, index: int) -> str:
        return f"{self.key('bloom')}:{index}"

    @property
    def pattern(self) -> str:
        """A SCAN ``MATCH`` pattern for every key of the crawl (glob characters escaped)."""
        escaped = "".join(f"\\{ch}" if ch in "*?[]\\" else ch for ch in self.prefix)
        return f"{escaped}:*"
