"""Item sinks. The PostgreSQL one lives in ``crawlfleet.pipeline.sinks.postgres`` (needs psycopg)."""

from crawlfleet.pipeline.sinks.csv import CsvSink
from crawlfleet.pipeline.sinks.jsonl import JsonlSink
from crawlfleet.pipeline.sinks.memory import MemorySink
from crawlfleet.pipeline.sinks.sqlite import SqliteSink
from crawlfleet.pipeline.sinks.stored import StoredItem

__all__ = ["CsvSink", "JsonlSink", "MemorySink", "SqliteSink", "StoredItem"]
