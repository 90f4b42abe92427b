"""The SQLite ``QueueStore`` (the embedded crawl's resumable frontier) and its state file."""

from crawlfleet.frontier.sqlite.store import SqliteQueueStore

__all__ = ["SqliteQueueStore"]
