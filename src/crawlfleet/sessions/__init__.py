"""Per-domain login sessions (cookie jars) shared by every process of a crawl."""

from crawlfleet.sessions.protocols import (
    CrawlSession,
    CrawlSessionStore,
    SessionStore,
    StoredSession,
)

__all__ = ["CrawlSession", "CrawlSessionStore", "SessionStore", "StoredSession"]
