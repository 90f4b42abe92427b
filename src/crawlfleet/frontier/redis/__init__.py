"""The Redis frontier store: keys, Lua scripts, Bloom seen filter and ``RedisQueueStore``."""

from crawlfleet.frontier.redis.bloom import BloomGeometry
from crawlfleet.frontier.redis.keys import CrawlKeys
from crawlfleet.frontier.redis.store import RedisQueueStore

__all__ = ["BloomGeometry", "CrawlKeys", "RedisQueueStore"]
