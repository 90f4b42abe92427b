"""crawlfleet: crawl and scrape the web, embedded or distributed.

What a parser module and a Python caller need, in one place::

    from crawlfleet import Expect, Follow, Item, parser
    from crawlfleet import Crawl, load_settings

    result = Crawl(load_settings(seeds=["https://example.com/"])).run()
"""

from crawlfleet.api import Crawl
from crawlfleet.counters import CrawlStats
from crawlfleet.errors import (
    ConfigError,
    CrawlfleetError,
    DropItem,
    FetchError,
    StateError,
)
from crawlfleet.models import CrawlRequest, FetchResult, Item, Link, ParseResult
from crawlfleet.monitoring.stats import Sample
from crawlfleet.monitoring.summary import CrawlResult
from crawlfleet.parsing import Contract, Expect, Follow, Response, parser
from crawlfleet.settings import Settings
from crawlfleet.settings.loading import load_settings

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Contract",
    "Crawl",
    "CrawlRequest",
    "CrawlResult",
    "CrawlStats",
    "CrawlfleetError",
    "DropItem",
    "Expect",
    "FetchError",
    "FetchResult",
    "Follow",
    "Item",
    "Link",
    "ParseResult",
    "Response",
    "Sample",
    "Settings",
    "StateError",
    "__version__",
    "load_settings",
    "parser",
]
