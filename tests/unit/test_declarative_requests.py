"""Declarative parsers over JSON APIs (JSON paths, cursors) and with a link's context."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.models import CrawlRequest, FetchResult, Link
from crawlfleet.parsing import selector_parser
from crawlfleet.parsing.jsonpath import compile_path

API = "https://api.test/v1/products?limit=2"
DOC = {
    "data": {
        "products": [
            {"id": 7, "name": "Lamp", "price": {"amount": 12.5}, "tags": ["home", "light"]},
            {"id": 8, "name": "Desk", "price": {"amount": "99.00"}, "tags": []},
        ],
        "next_cursor": "c/2 x",
        "related": ["/v1/products/9", None, "https://other.test/p"],
    }
}
JSON_PARSER: dict[str, Any] = {
    "name": "api",
    "domain": "api.test",
    "item_type": "product",
    "item_json": "data.products",
    "key": "id",
    "fields": {
        "id": {"json": "id"},
        "name": {"json": "name"},
        "price": {"json": "price.amount", "type": "decimal"},
        "first_tag": {"json": "tags[0]"},
        "tags": {"json": "tags[*]", "all": True},
        "source": {"context": "source"},
    },
    "follow": [
        {
            "json": "data.next_cursor",
            "url_template": "/v1/products?cursor={value}",
            "priority": 5,
            "data": {"source": {"context": "source"}},
        },
        {"json": "data.related[*]", "deny": "other"},
    ],
}


def result(doc: Any, url: str = API, context: dict[str, Any] | None = None) -> FetchResult:
    request = CrawlRequest(url, "fp", "api.test", data=context or {})
    body = doc if isinstance(doc, bytes) else orjson.dumps(doc)
    headers = {"content-type": "application/json"}
    return FetchResult(url, url, 200, headers, body, 0.0, request=request)


def test_a_json_parser_reads_items_fields_and_follows_the_cursor() -> None:
    parsed = selector_parser(JSON_PARSER).parse(result(DOC, context={"source": "seed"}))
    assert [(i.key, i.data) for i in parsed.items] == [
        ("7", {"id": 7, "name": "Lamp", "price": "12.5", "first_tag": "home",
               "tags": ["home", "light"], "source": "seed"}),
        ("8", {"id": 8, "name": "Desk", "price": "99.00", "first_tag": None, "tags": [],
               "source": "seed"}),
    ]  # fmt: skip
    assert parsed.links == [
        Link("https://api.test/v1/products?cursor=c%2F2%20x", 5, data={"source": "seed"}),
        Link("https://api.test/v1/products/9"),
    ]


def test_the_last_page_follows_nothing_and_non_json_is_an_error() -> None:
    parser = selector_parser(JSON_PARSER).parse
    last = {"data": {"products": [], "next_cursor": None}}
    assert parser(result(last)).links == []
    with pytest.raises(ValueError, match="the response is not JSON"):
        parser(result(b"<html>oops</html>"))


def test_without_item_json_the_document_is_the_item() -> None:
    spec = {"name": "one", "pattern": "/v1/*", "fields": {"count": {"json": "data.products[*]"}}}
    (item,) = selector_parser(spec).parse(result(DOC)).items
    assert item.data == {"count": DOC["data"]["products"][0]}


PAGE = b"""<html><body><h1>Poetry</h1>
<ul class="cards"><li><a href="/items/1/">One</a></li><li><a href="/items/2/">Two</a></li></ul>
<a class="next" href="?page=2">next</a></body></html>"""


def test_html_follow_rules_give_a_context_read_from_the_page() -> None:
    spec = {
        "name": "aisle",
        "pattern": "/aisles/*",
        "fields": {"heading": {"css": "h1"}, "from": {"context": "trail[0]"}},
        "follow": [
            {"pattern": "/items/", "data": {"category": {"css": "h1"}}},
            {"css": "a.next", "data": {"trail": {"context": "trail"}}},
        ],
    }
    url = "https://shop.test/aisles/3/"
    request = CrawlRequest(url, "fp", "shop.test", data={"trail": ["index"]})
    page = FetchResult(url, url, 200, {"content-type": "text/html"}, PAGE, 0.0, request=request)
    parsed = selector_parser(spec).parse(page)
    assert [i.data for i in parsed.items] == [{"heading": "Poetry", "from": "index"}]
    assert [(link.url, dict(link.data)) for link in parsed.links] == [
        ("https://shop.test/items/1/", {"category": "Poetry"}),
        ("https://shop.test/items/2/", {"category": "Poetry"}),
        ("https://shop.test/aisles/3/?page=2", {"trail": ["index"]}),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"fields": {"a": {"json": "x", "css": "p"}}}, "exactly one of css or xpath"),
        ({"fields": {"a": {"json": "x[y]"}}}, r"bad JSON path 'x\[y\]'"),
        ({"item_css": "div"}, "cannot use css or xpath"),
        ({"follow": [{"pattern": "/p/"}]}, "follow rules need json"),
        ({"follow": [{"json": "n", "url_template": "/p"}]}, r"must hold \{value\}"),
        ({"follow": [{"json": "n", "css": "a"}]}, "json or css, not both"),
    ],
)
def test_bad_json_declarations_name_the_parser(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"'api': .*{message}"):
        selector_parser({**JSON_PARSER, **change})


def test_html_parsers_cannot_follow_json_paths() -> None:
    spec = {"name": "h", "pattern": "/x", "fields": {"a": {"css": "p"}}, "follow": [{"json": "n"}]}
    with pytest.raises(ConfigError, match="follow rules with json need a JSON parser"):
        selector_parser(spec)


@pytest.mark.parametrize(
    ("path", "selected"),
    [
        ("data.products[*].name", ["Lamp", "Desk"]),
        ("$.data.products[-1].id", [8]),
        ("data.products.*.price.amount", [12.5, "99.00"]),
        ('["data"].next_cursor', ["c/2 x"]),
        ("data.missing.deeper", []),
        ("data.products[9]", []),
        ("data.next_cursor[0]", []),
    ],
)
def test_json_paths(path: str, selected: list[Any]) -> None:
    assert compile_path(path).select(DOC) == selected
