"""Why a distributed crawl's items were rejected, read from PostgreSQL's ``item_rejects``."""

from __future__ import annotations

import psycopg

from crawlfleet.errors import StateError
from crawlfleet.pipeline.reject_reasons import RejectReason
from crawlfleet.redact import redact

POSTGRES_REASONS = (
    "SELECT reason, item_type, count(*), min(url) FROM item_rejects WHERE crawl_id = %s"
    " GROUP BY reason, item_type ORDER BY count(*) DESC, reason, item_type LIMIT %s"
)


def postgres_reasons(dsn: str, *, crawl_id: str, limit: int) -> list[RejectReason]:
    """The ``limit`` most frequent reasons of the crawl's rejects; ``StateError`` if unreadable."""
    try:
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
            rows = conn.execute(POSTGRES_REASONS, (crawl_id, limit)).fetchall()
    except psycopg.Error as exc:
        text = " ".join(str(exc).split())
        raise StateError(redact(f"PostgreSQL at {dsn}: {text}", dsn)) from None
    return [RejectReason(str(r), str(t), int(n), str(u)) for r, t, n, u in rows]
