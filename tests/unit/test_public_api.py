"""The package's public API is what ``__all__`` says, and each name imports."""

from __future__ import annotations

import crawlfleet


def test_every_public_name_is_importable() -> None:
    for name in crawlfleet.__all__:
        assert getattr(crawlfleet, name) is not None


def test_a_parser_module_needs_only_the_top_level_package() -> None:
    @crawlfleet.parser("shop.example", pattern="/p/*", item_type="product")
    def product(response: crawlfleet.Response) -> dict[str, str]:
        return {"key": "1"}

    assert callable(product)
