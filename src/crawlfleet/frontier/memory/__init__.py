"""The in-memory ``QueueStore``: for tests, and the reference model of the contract."""

from crawlfleet.frontier.memory.store import MemoryQueueStore

__all__ = ["MemoryQueueStore"]
