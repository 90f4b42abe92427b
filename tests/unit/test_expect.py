"""Parser expectations: what a page misses, in plugin and declared parsers."""

from __future__ import annotations

from typing import Any

import pytest

from crawlfleet import Expect
from crawlfleet.errors import ConfigError
from crawlfleet.models import FetchResult, Item, Link, ParseResult
from crawlfleet.parsing import selector_parser
from crawlfleet.parsing.expect import reason_of, unmet
from crawlfleet.parsing.plugins import PluginParser
from crawlfleet.parsing.response import Response

PRODUCT = b"""<html><body><div class="product"><h1 class="name">Shoe</h1>
<p class="price">10</p><a href="/next">next</a></div></body></html>"""


def page(body: bytes = PRODUCT, content_type: str = "text/html") -> FetchResult:
    url = "https://shop.test/p/1"
    return FetchResult(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": content_type},
        body=body,
        elapsed_s=0.0,
    )


def parsed(*items: dict[str, Any], links: int = 0) -> ParseResult:
    result = ParseResult(items=[Item("product", dict(data)) for data in items])
    result.links = [Link(f"https://shop.test/{n}") for n in range(links)]
    return result


def test_a_page_that_holds_everything_misses_nothing() -> None:
    expect = Expect(selectors=("div.product", ".price"), fields=("name",), min_items=1)
    assert unmet(expect, Response(page()), parsed({"name": "Shoe"})) == ()


def test_each_missing_part_is_named_once_in_the_expectations_order() -> None:
    expect = Expect(
        selectors=("div.product", "span.cost"),
        fields=("name", "price"),
        min_items=3,
        min_links=1,
    )
    got = parsed({"name": "Shoe", "price": ""}, {"name": None}, links=0)
    assert unmet(expect, Response(page()), got) == (
        "selector 'span.cost'",
        "items: 2 < 3",
        "links: 0 < 1",
        "field 'name' (1 of 2 items)",
        "field 'price' (2 of 2 items)",
    )
    assert [reason_of(m) for m in unmet(expect, Response(page()), got)] == [
        "selector 'span.cost'",
        "items",
        "links",
        "field 'name'",
        "field 'price'",
    ]


def test_a_page_that_is_not_html_matches_no_selector() -> None:
    expect = Expect(selectors=("div.product",))
    json_page = Response(page(b'{"a": 1}', "application/json"))
    assert unmet(expect, json_page, parsed()) == ("selector 'div.product'",)


def test_one_string_instead_of_a_list_is_refused() -> None:
    with pytest.raises(ConfigError, match="lists, not one string"):
        Expect(selectors="div.product")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=">= 0"):
        Expect(min_items=-1)


def test_a_plugin_parser_reports_what_its_page_missed() -> None:
    def product(response: Response) -> dict[str, Any]:
        price = response.css_first(".cost")
        return {"price": price.text() if price is not None else None}

    parser = PluginParser(
        product, name="shop", item_type="product", follow=(), expect=Expect(fields=("price",))
    )
    assert parser(page()).unmet == ("field 'price' (1 of 1 items)",)
    plain = PluginParser(product, name="shop", item_type="product", follow=())
    assert plain(page()).unmet == ()


def test_a_declared_parser_takes_its_expectations_from_the_declaration() -> None:
    spec = selector_parser(
        {
            "name": "shop",
            "domain": "shop.test",
            "fields": {"name": {"css": "h1.name"}, "price": {"css": ".cost"}},
            "expect": {"selectors": ["div.product"], "fields": ["name", "price"], "min_items": 1},
        }
    )
    assert spec.expect == Expect(("div.product",), ("name", "price"), 1, 0)
    assert spec.parse(page()).unmet == ("field 'price' (1 of 1 items)",)
    with pytest.raises(ConfigError, match="expect"):
        selector_parser(
            {"name": "x", "domain": "a.test", "fields": {"a": {"css": "a"}}, "expect": {"css": 1}}
        )
