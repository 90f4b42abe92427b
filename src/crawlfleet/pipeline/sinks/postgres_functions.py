"""The server-side functions of the PostgreSQL sink, created by migration 7 (``postgres_schema``).

``crawlfleet_write_pages`` writes one batch of ``postgres_writes`` in one call: the client
sends one statement a batch and reads nothing back (decision 0037). Its arguments are
parallel arrays: the batch's rows in (type, key) byte order, each with the call it came from
(``row_calls``, 0-based in the batch) and its place in the batch's calls (``row_orders``);
the pages in call order with their call and time; what each page yields now. Three
statements, each seeing what the one before it wrote:

1. locks the stored versions of the rows, one key at a time in the order of the arrays, so
   two workers writing one key record one change each, in the order their writes apply; it
   locks only rows that exist, so a key another transaction inserts and holds meanwhile can
   still close a deadlock, which PostgreSQL breaks by aborting one side (``postgres.py`` tries
   the group again);
2. records what each page yields now, deleting what it yields no more, and keeps the items
   gone: those a page yields no more and no page yields at the point of its call, as if the
   calls had run one at a time: a page before it in the batch as it yields now, one after it
   (or outside the batch) as it did before (the delete and the insert never touch one row:
   one statement could not order them); it finds each page's rows by the primary key, then
   deletes them by their ``ctid``, one TID lookup a row (decision 0033);
3. upserts the rows in that order (the rule of ``postgres.py``) and appends to
   ``item_changes``, call by call, the rows it inserted (``new``), those it updated to another
   content hash (``changed``, with ``crawlfleet_diff`` of the version the statement replaced:
   the one statement 1 locked) and the items gone. A row an older version did not touch is
   not a change; a key two workers insert at once is ``new`` once.

Each key and page is looked up in a ``LATERAL`` subquery the planner cannot flatten into a
join (``FOR UPDATE``, ``OFFSET 0``), by an index that leads with the crawl and that key
(decision 0031): one probe a key, whatever the statistics, in the generic plans PL/pgSQL
caches once a session (decision 0033).

``crawlfleet_diff`` is ``changes.diff`` in SQL: the top-level fields whose values differ
(a missing field is ``null``), the volatile fields left out.

This text is a migration's: it never changes; a new version of a function is a new migration.
"""

WRITE_PAGES = """
CREATE FUNCTION crawlfleet_diff(stored jsonb, written jsonb, volatile text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(f.name, jsonb_build_object(
               'old', coalesce(stored -> f.name, 'null'),
               'new', coalesce(written -> f.name, 'null'))), '{}')
    FROM (SELECT jsonb_object_keys(stored) UNION SELECT jsonb_object_keys(written)) AS f (name)
    WHERE f.name <> ALL (volatile)
      AND coalesce(stored -> f.name, 'null') <> coalesce(written -> f.name, 'null')
$$;

CREATE FUNCTION crawlfleet_write_pages(
    p_crawl text, p_volatile text[],
    p_types text[], p_keys text[], p_data text[], p_hashes text[], p_fetched timestamptz[],
    p_nows timestamptz[], p_row_calls integer[], p_row_orders integer[],
    p_pages text[], p_page_calls integer[], p_page_nows timestamptz[],
    p_yield_pages text[], p_yield_types text[], p_yield_keys text[]
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    gone_calls integer[];
    gone_ats timestamptz[];
    gone_types text[];
    gone_keys text[];
BEGIN
    PERFORM 1
    FROM unnest(p_types, p_keys) AS k (item_type, item_key)
    CROSS JOIN LATERAL (
        SELECT 1 FROM items i
        WHERE i.crawl_id = p_crawl AND i.item_type = k.item_type AND i.item_key = k.item_key
        FOR UPDATE
    ) AS i;

    WITH calls (page, call, at) AS (SELECT * FROM unnest(p_pages, p_page_calls, p_page_nows)),
    yields (page, item_type, item_key) AS (
        SELECT * FROM unnest(p_yield_pages, p_yield_types, p_yield_keys)
    ),
    held AS (
        SELECT h.row_id FROM calls c
        CROSS JOIN LATERAL (
            SELECT p.ctid AS row_id, p.page, p.item_type, p.item_key FROM page_items p
            WHERE p.crawl_id = p_crawl AND p.page = c.page
            OFFSET 0
        ) AS h
        WHERE NOT EXISTS (
            SELECT 1 FROM yields y
            WHERE y.page = h.page AND y.item_type = h.item_type AND y.item_key = h.item_key
        )
    ),
    dropped AS (
        DELETE FROM page_items p USING held h WHERE p.ctid = h.row_id
        RETURNING p.page, p.item_type, p.item_key, ARRAY(
            SELECT o.page FROM page_items o WHERE o.crawl_id = p.crawl_id
            AND o.item_type = p.item_type AND o.item_key = p.item_key AND o.page <> p.page
        ) AS elsewhere
    ),
    added AS (
        INSERT INTO page_items (crawl_id, page, item_type, item_key)
        SELECT p_crawl, page, item_type, item_key FROM yields ON CONFLICT DO NOTHING
    )
    SELECT array_agg(c.call), array_agg(c.at), array_agg(d.item_type), array_agg(d.item_key)
    INTO gone_calls, gone_ats, gone_types, gone_keys
    FROM dropped d JOIN calls c ON c.page = d.page
    WHERE NOT EXISTS (
        SELECT 1 FROM unnest(d.elsewhere) AS e (page) LEFT JOIN calls o ON o.page = e.page
        WHERE coalesce(o.call, c.call + 1) > c.call
    )
    AND NOT EXISTS (
        SELECT 1 FROM yields y JOIN calls o ON o.page = y.page
        WHERE y.item_type = d.item_type AND y.item_key = d.item_key AND o.call < c.call
    );

    WITH u (item_type, item_key, data, content_hash, fetched_at, at, call, ord) AS (
        SELECT * FROM unnest(p_types, p_keys, p_data, p_hashes, p_fetched, p_nows,
                             p_row_calls, p_row_orders)
    ),
    up AS (
        INSERT INTO items AS i (crawl_id, item_type, item_key, data, content_hash, fetched_at,
                                first_seen, last_seen, last_changed)
        SELECT p_crawl, u.item_type, u.item_key, u.data::jsonb, u.content_hash, u.fetched_at,
               u.at, u.at, u.at
        FROM u
        ON CONFLICT (crawl_id, item_type, item_key) DO UPDATE SET
            last_seen = excluded.last_seen,
            fetched_at = excluded.fetched_at,
            data = CASE WHEN i.content_hash = excluded.content_hash
                        THEN i.data ELSE excluded.data END,
            last_changed = CASE WHEN i.content_hash = excluded.content_hash
                                THEN i.last_changed ELSE excluded.last_changed END,
            content_hash = excluded.content_hash
        WHERE (excluded.fetched_at, excluded.content_hash COLLATE "C")
              >= (i.fetched_at, i.content_hash COLLATE "C")
        RETURNING i.item_type, i.item_key, (i.xmax = 0) AS inserted
    ),
    changes (call, part, ord, at, item_type, item_key, change, diff) AS (
        SELECT u.call, 0, u.ord, u.at, u.item_type, u.item_key,
               CASE WHEN up.inserted THEN 'new' ELSE 'changed' END,
               CASE WHEN up.inserted THEN NULL
                    ELSE crawlfleet_diff(o.data, u.data::jsonb, p_volatile) END
        FROM up JOIN u ON u.item_type = up.item_type AND u.item_key = up.item_key
        LEFT JOIN LATERAL (
            SELECT o.data, o.content_hash FROM items o
            WHERE o.crawl_id = p_crawl AND o.item_type = up.item_type
              AND o.item_key = up.item_key
            OFFSET 0
        ) AS o ON true
        WHERE up.inserted OR o.content_hash <> u.content_hash
        UNION ALL
        SELECT g.call, 1, 0, g.at, g.item_type, g.item_key, 'gone', NULL
        FROM unnest(gone_calls, gone_ats, gone_types, gone_keys)
            AS g (call, at, item_type, item_key)
    )
    INSERT INTO item_changes (crawl_id, at, item_type, item_key, change, diff)
    SELECT p_crawl, at, item_type, item_key, change, diff FROM changes
    ORDER BY call, part, ord, item_type COLLATE "C", item_key COLLATE "C";
END
$$;
"""
