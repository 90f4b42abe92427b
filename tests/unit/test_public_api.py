"""The package's public API is what ``__all__`` says, and each name imports."""

from __future__ import annotations

import pytest

import crawlfleet


def test_every_public_name_is_importable() -> None:
    for name in crawlfleet.__all__:
        assert getattr(crawlfleet, name) is not None
    assert {"Crawl", "CrawlResult", "CrawlStats", "Sample"} <= set(crawlfleet.__all__)


def test_a_parser_module_needs_only_the_top_level_package() -> None:
    @crawlfleet.parser("shop.example", pattern="/p/*", item_type="product")
    def product(response: crawlfleet.Response) -> dict[str, str]:
        return {"key": "1"}

    assert callable(product)


def test_a_crawl_refuses_bad_seeds_before_it_starts() -> None:
    settings = crawlfleet.load_settings()
    with pytest.raises(crawlfleet.ConfigError, match="no seed URL"):
        crawlfleet.Crawl(settings)
    with pytest.raises(crawlfleet.ConfigError, match="bad seed"):
        crawlfleet.Crawl(settings, seeds=["ftp://example.com/"])
