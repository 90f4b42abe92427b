"""The SQL the embedded crawl's store runs on its state file (``schema.py``: the tables).

``SqliteQueueStore`` (``store.py``) and its ``StateFile`` (``file.py``) run them all; the read-only
``SqliteStateReader`` (``reader.py``) shares some of its reads. A
``state = N`` in a statement is a request state of ``schema.py`` (0 queued, 1 leased,
2 done, 3 dead, 4 seen only).
"""

from __future__ import annotations

from crawlfleet.records import ATTEMPT_COLUMNS

REQUEST_COLUMNS = (
    "fp, url, domain, depth, priority, attempt, fetcher, parent, data, method, body, headers"
)
REQUEST_COLUMN_COUNT = len(REQUEST_COLUMNS.split(","))
POLICY_COLUMNS = (
    "delay_s, delay_source, max_in_flight, level, block_window, streak, cooldown_until,"
    " block_reason, retry_after_until, strategy, drift"
)

FIND_SEEN = "SELECT fp FROM requests WHERE fp IN (SELECT value FROM json_each(?))"
INSERT_QUEUED = f"INSERT INTO requests ({REQUEST_COLUMNS}, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
# A domain's whole row, as the store's memory has it (written once a turn: file.py).
WRITE_DOMAIN = (
    f"INSERT INTO domains (domain, {POLICY_COLUMNS}, ready_at, admitted, counters)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (domain) DO UPDATE SET delay_s = excluded.delay_s,"
    " delay_source = excluded.delay_source, max_in_flight = excluded.max_in_flight,"
    " level = excluded.level, block_window = excluded.block_window, streak = excluded.streak,"
    " cooldown_until = excluded.cooldown_until, block_reason = excluded.block_reason,"
    " retry_after_until = excluded.retry_after_until, strategy = excluded.strategy,"
    " drift = excluded.drift,"
    " ready_at = excluded.ready_at, admitted = excluded.admitted, counters = excluded.counters"
)
INSERT_ATTEMPT = (
    f"INSERT INTO attempts ({ATTEMPT_COLUMNS})"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
START = "INSERT OR IGNORE INTO meta (key, value) VALUES ('started_at', ?)"
STARTED_AT = "SELECT value FROM meta WHERE key = 'started_at'"
TAKE = (
    f"SELECT seq, not_before, hand_outs, {REQUEST_COLUMNS} FROM requests"
    " WHERE state = 0 AND domain = ? AND fetcher = ? AND not_before <= ?"
    " ORDER BY priority DESC, seq LIMIT 1"
)
LEASE = "UPDATE requests SET state = 1, hand_outs = ?, expires_at = ? WHERE seq = ?"
EARLIEST = "SELECT min(not_before) FROM requests WHERE state = 0 AND domain = ? AND fetcher = ?"
COMPLETE = (
    "UPDATE requests SET state = 2, expires_at = NULL WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
RETRY = (
    "UPDATE requests SET state = 0, attempt = attempt + 1, not_before = ?, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?) WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
BURY = (
    "UPDATE requests SET state = 3, died_at = ?, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?) WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
# A current lease (fp, hand_outs) extended to ?1, never shortened.
MOVE = (
    "UPDATE requests SET state = 0, fetcher = ?, not_before = 0, expires_at = NULL"
    " WHERE fp = ? AND state = 1 AND hand_outs = ?"
)
RENEW = (
    "UPDATE requests SET expires_at = max(expires_at, ?) WHERE fp = ? AND state = 1"
    " AND hand_outs = ?"
)
# Expired leases (?1 = now) count as failed attempts: past ?2 = max_retries they die (at
# their lease's expiry), the others go back to their queue; ?3 is the error recorded.
EXPIRED = (
    f"SELECT {REQUEST_COLUMNS}, expires_at FROM requests WHERE state = 1 AND expires_at < ?1"
    " ORDER BY expires_at, seq"
)
REAP_DEAD = (
    "UPDATE requests SET state = 3, died_at = expires_at, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?3) WHERE state = 1 AND expires_at < ?1"
    " AND attempt >= ?2"
)
REAP = (
    "UPDATE requests SET state = 0, attempt = attempt + 1, not_before = 0, expires_at = NULL,"
    " errors = json_insert(errors, '$[#]', ?3) WHERE state = 1 AND expires_at < ?1"
    " AND attempt < ?2"
)
DEAD_LETTERS = (
    f"SELECT {REQUEST_COLUMNS}, errors, died_at FROM requests WHERE state = 3"
    " ORDER BY died_at, seq LIMIT ? OFFSET ?"
)
# Dead-letter selections: all of them (?1 IS NULL) or those in a JSON list of fingerprints.
DEAD_WHERE = "state = 3 AND (?1 IS NULL OR fp IN (SELECT value FROM json_each(?1)))"
DEAD_BY_LANE = (
    f"SELECT domain, fetcher, count(*) FROM requests WHERE {DEAD_WHERE} GROUP BY domain, fetcher"
)
REQUEUE_DEAD = (
    "UPDATE requests SET state = 0, attempt = 0, not_before = 0, errors = '[]', died_at = NULL"
    f" WHERE {DEAD_WHERE}"
)
PURGE_DEAD = f"UPDATE requests SET state = 4, errors = '[]', died_at = NULL WHERE {DEAD_WHERE}"

COUNT_BY_STATE = "SELECT state, count(*) FROM requests GROUP BY state"
LOAD_DOMAINS = f"SELECT domain, ready_at, admitted, counters, {POLICY_COLUMNS} FROM domains"
# Per lane: queued, how many wait for a not-before time, and the earliest of those times.
LOAD_QUEUED = (
    "SELECT domain, fetcher, count(*), sum(not_before > 0),"
    " min(CASE WHEN not_before > 0 THEN not_before END) FROM requests"
    " WHERE state = 0 GROUP BY domain, fetcher"
)
LOAD_LEASED = "SELECT domain, count(*) FROM requests WHERE state = 1 GROUP BY domain"

REMEMBER = (
    "INSERT OR REPLACE INTO known (fp, etag, last_modified, content_hash, interval_s, next_at,"
    " priority, item_types, visited_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
VISIT = (
    "SELECT etag, last_modified, content_hash, interval_s, next_at, priority, item_types,"
    " visited_at FROM known"
    " WHERE fp = ?"
)
# Due known URLs (?1 = now, ?2 = limit), earliest first, with their request's state.
DUE = (
    "SELECT k.fp, k.priority, r.state, r.domain, r.fetcher FROM known k"
    " JOIN requests r ON r.fp = k.fp WHERE k.next_at <= ?1 ORDER BY k.next_at LIMIT ?2"
)
CLEAR_DUE = "UPDATE known SET next_at = NULL WHERE fp = ?"
REQUEUE_DONE = (
    "UPDATE requests SET state = 0, attempt = 0, not_before = 0, priority = ?, errors = '[]'"
    " WHERE fp = ? AND state = 2"
)
NEXT_VISIT = "SELECT min(next_at) FROM known WHERE next_at IS NOT NULL"
