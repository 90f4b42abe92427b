"""The PostgreSQL schema of the distributed runtime, as numbered migrations.

Tables:
- ``items(item_type, item_key, data jsonb, content_hash, crawl_id, first_seen, last_seen,
  last_changed, fetched_at)``, unique on (crawl_id, item_type, item_key): the same rows as
  the embedded SQLite sink (each crawl id its own key namespace).
- ``item_rejects(id, crawl_id, item_type, item_key, reason, url, data jsonb, at)``: invalid
  items with the reason and the page they came from.
- ``attempts``: one row per fetch attempt (URL, worker, outcome, status, bytes, latency, error,
  fetcher kind, detail, crawl session id, proxy id, proxy tier, screenshot), unique on
  (crawl_id, fingerprint, retry, at).
- ``item_changes(id, crawl_id, at, item_type, item_key, change, diff jsonb)``: the change
  feed (``pipeline/changes.py``), and ``page_items(crawl_id, page, item_type, item_key)``:
  what each page yielded at its last parse.
- ``archive_captures(crawl_id, url, at, status, digest, file, offset, length, kind, mime)``
  and ``archive_roots(crawl_id, root)``: the capture index of a crawl's archive
  (``archive/postgres_index.py``).
- ``quality_scores(crawl_id, parser, domain, pages, met, items, filled jsonb, updated_at)``
  (``domain`` ``''``: the parser's totals) and ``quality_item_types(crawl_id, item_type,
  stored, invalid, duplicate, updated_at)``: a distributed crawl's quality scores as its
  dispatcher last wrote them (``monitoring/postgres_quality.py``).
- ``schema_migrations``: which migrations ran.

Functions: ``crawlfleet_write_pages`` (the sink's write of a batch of pages) and
``crawlfleet_diff`` (a changed item's diff), both in ``postgres_functions``.

``migrate`` is idempotent and safe to run from several processes at once (an advisory lock).
"""

from __future__ import annotations

import psycopg

from crawlfleet.errors import StateError
from crawlfleet.pipeline.sinks.postgres_functions import WRITE_PAGES
from crawlfleet.redact import redact

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE items (
        item_type    text        NOT NULL,
        item_key     text        NOT NULL,
        data         jsonb       NOT NULL,
        content_hash text        NOT NULL,
        crawl_id     text        NOT NULL DEFAULT '',
        first_seen   timestamptz NOT NULL,
        last_seen    timestamptz NOT NULL,
        last_changed timestamptz NOT NULL,
        PRIMARY KEY (item_type, item_key)
    );
    CREATE TABLE item_rejects (
        id        bigserial   PRIMARY KEY,
        item_type text        NOT NULL,
        reason    text        NOT NULL,
        url       text        NOT NULL,
        data      jsonb       NOT NULL,
        at        timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE attempts (
        id          bigserial        PRIMARY KEY,
        crawl_id    text             NOT NULL,
        url         text             NOT NULL,
        fingerprint text             NOT NULL,
        domain      text             NOT NULL,
        worker      text             NOT NULL,
        outcome     text             NOT NULL,
        status      integer,
        bytes       integer          NOT NULL,
        latency_s   double precision NOT NULL,
        retry       integer          NOT NULL,
        at          timestamptz      NOT NULL,
        error       text
    );
    CREATE INDEX attempts_crawl_domain ON attempts (crawl_id, domain);
    CREATE TABLE crawl_runs (
        crawl_id    text        PRIMARY KEY,
        settings    jsonb       NOT NULL,
        started_at  timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz,
        reason      text
    );
    """,
    # 2: attempts copied from the store by the dispatcher (idempotent copy), with the fetcher
    # kind and a parser's traceback; crawl_runs was never written.
    """
    ALTER TABLE attempts ADD COLUMN fetcher text NOT NULL DEFAULT 'http';
    ALTER TABLE attempts ADD COLUMN detail text;
    DELETE FROM attempts a USING attempts b
        WHERE a.id > b.id AND a.crawl_id = b.crawl_id AND a.fingerprint = b.fingerprint
          AND a.retry = b.retry AND a.at = b.at;
    CREATE UNIQUE INDEX attempts_once ON attempts (crawl_id, fingerprint, retry, at);
    DROP TABLE crawl_runs;
    """,
    # 3: keys scoped by crawl (rows keep the crawl id they were written with), the fetch time
    # as the version, and the crawl of each reject.
    """
    ALTER TABLE items ADD COLUMN fetched_at timestamptz;
    UPDATE items SET fetched_at = last_seen;
    ALTER TABLE items ALTER COLUMN fetched_at SET NOT NULL;
    ALTER TABLE items DROP CONSTRAINT items_pkey;
    ALTER TABLE items ADD PRIMARY KEY (crawl_id, item_type, item_key);
    ALTER TABLE item_rejects ADD COLUMN crawl_id text NOT NULL DEFAULT '';
    ALTER TABLE item_rejects ADD COLUMN item_key text;
    CREATE INDEX item_rejects_crawl ON item_rejects (crawl_id, item_type);
    """,
    # 4: the crawl session, proxy id and tier each attempt went through
    # (runtime/fetching/proxy_link.py) and the browser fetcher's screenshot of a failed page.
    """
    ALTER TABLE attempts ADD COLUMN session_id text;
    ALTER TABLE attempts ADD COLUMN proxy_id text;
    ALTER TABLE attempts ADD COLUMN tier integer;
    ALTER TABLE attempts ADD COLUMN screenshot text;
    """,
    # 5: the change feed and what each page yields (decision 0014).
    """
    CREATE TABLE item_changes (
        id        bigserial   PRIMARY KEY,
        crawl_id  text        NOT NULL,
        at        timestamptz NOT NULL,
        item_type text        NOT NULL,
        item_key  text        NOT NULL,
        change    text        NOT NULL,
        diff      jsonb
    );
    CREATE INDEX item_changes_at ON item_changes (crawl_id, at);
    CREATE TABLE page_items (
        crawl_id  text NOT NULL,
        page      text NOT NULL,
        item_type text NOT NULL,
        item_key  text NOT NULL,
        PRIMARY KEY (crawl_id, page, item_type, item_key)
    );
    CREATE INDEX page_items_item ON page_items (crawl_id, item_type, item_key);
    """,
    # 6: the index of an item's pages leads with the item, so a lookup of a crawl's pages
    # cannot take it for a lookup by crawl alone (what each page yields: postgres_functions).
    """
    DROP INDEX page_items_item;
    CREATE INDEX page_items_item ON page_items (item_type, item_key, crawl_id);
    """,
    # 7: a batch of pages written by one call (postgres_writes, decision 0037).
    WRITE_PAGES,
    # 8: the capture index of a crawl's WARC archive and where its files are (archive/,
    # decision 0049).
    """
    CREATE TABLE archive_captures (
        crawl_id text             NOT NULL,
        url      text             NOT NULL,
        at       double precision NOT NULL,
        status   integer          NOT NULL,
        digest   text             NOT NULL,
        file     text             NOT NULL,
        "offset" bigint           NOT NULL,
        length   bigint           NOT NULL,
        kind     text             NOT NULL,
        mime     text             NOT NULL
    );
    CREATE INDEX archive_captures_by_url ON archive_captures (crawl_id, url, at);
    CREATE INDEX archive_captures_by_file ON archive_captures (crawl_id, file);
    CREATE TABLE archive_roots (crawl_id text PRIMARY KEY, root text NOT NULL);
    """,
    # 9: a distributed crawl's quality scores, written by its dispatcher
    # (monitoring/postgres_quality.py, decision 0051).
    """
    CREATE TABLE quality_scores (
        crawl_id   text        NOT NULL,
        parser     text        NOT NULL,
        domain     text        NOT NULL,
        pages      bigint      NOT NULL,
        met        bigint      NOT NULL,
        items      bigint      NOT NULL,
        filled     jsonb       NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (crawl_id, parser, domain)
    );
    CREATE TABLE quality_item_types (
        crawl_id   text        NOT NULL,
        item_type  text        NOT NULL,
        stored     bigint      NOT NULL,
        invalid    bigint      NOT NULL,
        duplicate  bigint      NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (crawl_id, item_type)
    );
    """,
)

_LOCK_ID = 0x63726177  # "craw": serializes concurrent migrate() calls


def migrate(dsn: str) -> list[int]:
    """Apply the migrations not applied yet; returns their numbers (1-based)."""
    try:
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_ID,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            applied = []
            for number, sql in enumerate(MIGRATIONS, 1):
                if number in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)
                    conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (number,))
                applied.append(number)
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_ID,))
            return applied
    except psycopg.Error as exc:
        raise StateError(redact(f"PostgreSQL at {dsn}: {exc}".strip(), dsn)) from None
