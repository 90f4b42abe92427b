"""crawlfleet: crawl and scrape the web, embedded or distributed."""

__version__ = "0.1.0"
