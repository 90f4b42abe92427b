"""Per-domain login sessions (cookie jars) shared by every process of a crawl."""

from crawlfleet.sessions.protocols import SessionStore, StoredSession

__all__ = ["SessionStore", "StoredSession"]
