"""Fetchers: turn a ``CrawlRequest`` into a ``FetchResult`` (HTTP, local files)."""

from crawlfleet.fetchers.addresses import is_forbidden_address
from crawlfleet.fetchers.files import FileFetcher
from crawlfleet.fetchers.headers import default_headers
from crawlfleet.fetchers.http import HttpFetcher
from crawlfleet.fetchers.options import FetchOptions
from crawlfleet.fetchers.protocols import Fetcher

__all__ = [
    "FetchOptions",
    "Fetcher",
    "FileFetcher",
    "HttpFetcher",
    "default_headers",
    "is_forbidden_address",
]
