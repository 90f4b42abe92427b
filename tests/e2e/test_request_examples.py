"""The request examples (context, JSON API, POST search) crawl the demo shop and give exactly
its data, fetching only what they follow (``tests/e2e/test_examples.py`` has the pattern)."""

from __future__ import annotations

from pathlib import Path

from crawlfleet.demosite import PRODUCTS, ThreadedDemoSite
from crawlfleet.demosite.shop_aisles import aisle_path, item_path
from crawlfleet.demosite.shop_api import cursor_after
from crawlfleet.demosite.shop_data import CATEGORIES
from crawlfleet.demosite.shop_search import search
from tests.e2e.test_examples import EXAMPLES, assert_each_once, rejects, run_example

AISLES = EXAMPLES / "aisles"
SHOP_API = EXAMPLES / "shop_api"
SHOP_SEARCH = EXAMPLES / "shop_search"


def test_aisles_example_carries_each_items_category_from_its_listing(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    seed = site.url("shop", "/aisles/")
    parsers = str(AISLES / "parsers.py")
    items = run_example(tmp_path, seed, AISLES / "crawl.toml", "--parsers", parsers)

    assert items == {
        ("item", str(p.id)): {"name": p.name, "price": p.price_text, "category": p.category}
        for p in PRODUCTS
    }
    assert rejects(tmp_path) == []
    paths = [r.path for r in site.log if r.role == "shop"]
    assert_each_once(paths)
    aisles = {aisle_path(c) + suffix for c in CATEGORIES for suffix in ("", "?page=2")}
    items_paths = {item_path(p) for p in PRODUCTS}
    assert set(paths) == {"/robots.txt", "/aisles/", *aisles, *items_paths}


def test_shop_api_example_follows_the_cursor_to_the_last_page(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    seed = site.url("shop", "/api/products")
    items = run_example(tmp_path, seed, SHOP_API / "crawl.toml")

    assert items == {
        ("product", str(p.id)): {
            "id": p.id,
            "name": p.name,
            "price": f"{p.price_pence // 100}.{p.price_pence % 100:02d}",
            "category": p.category,
            "in_stock": p.stock,
        }
        for p in PRODUCTS
    }
    paths = [r.path for r in site.log if r.role == "shop"]
    cursors = [f"/api/products?cursor={cursor_after(n)}" for n in (10, 20, 30, 40)]
    assert paths == ["/robots.txt", "/api/products", *cursors]


def test_shop_search_example_posts_the_form_and_each_result_page(
    site: ThreadedDemoSite, tmp_path: Path
) -> None:
    seed = site.url("shop", "/search/")
    parsers = str(SHOP_SEARCH / "parsers.py")
    items = run_example(tmp_path, seed, SHOP_SEARCH / "crawl.toml", "--parsers", parsers)

    found = search("garden")
    assert len(found) == 10
    assert items == {
        ("hit", str(p.id)): {"name": p.name, "price": p.price_text, "query": "garden"}
        for p in found
    }
    requests = [(r.method, r.path, r.status) for r in site.log if r.role == "shop"]
    assert requests == [
        ("GET", "/robots.txt", 200),
        ("GET", "/search/", 200),
        ("POST", "/search/results", 200),
        ("POST", "/search/results", 200),
    ]
