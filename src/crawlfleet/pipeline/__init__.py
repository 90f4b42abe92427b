"""The item pipeline: ordered processors, data quality, and exporting the stored items."""

from crawlfleet.pipeline.export import export_items
from crawlfleet.pipeline.hashing import content_hash, item_key
from crawlfleet.pipeline.pipeline import Pipeline, PipelineOutcome
from crawlfleet.pipeline.processors import (
    Dedupe,
    InvalidItem,
    absolute_urls,
    clean_text,
    dedupe,
    default_processors,
    iso_dates,
    normalize_price,
    validate,
)
from crawlfleet.pipeline.protocols import Processor, Sink
from crawlfleet.pipeline.quality import DataQuality
from crawlfleet.pipeline.rejects import MemoryRejects, Reject, RejectStore

__all__ = [
    "DataQuality",
    "Dedupe",
    "InvalidItem",
    "MemoryRejects",
    "Pipeline",
    "PipelineOutcome",
    "Processor",
    "Reject",
    "RejectStore",
    "Sink",
    "absolute_urls",
    "clean_text",
    "content_hash",
    "dedupe",
    "default_processors",
    "export_items",
    "iso_dates",
    "item_key",
    "normalize_price",
    "validate",
]
