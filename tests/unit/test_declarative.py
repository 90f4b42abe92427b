"""Selector parsers declared in the crawl config: extraction, types, follow rules, errors."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from crawlfleet.errors import ConfigError
from crawlfleet.models import FetchResult, Link
from crawlfleet.parsing import Contract, load_parsers, selector_parser

QUOTES = """<html><head><title>Quotes</title></head><body>
<div class="quote"><span class="text">“Be yourself.”</span>
  <small class="author">Oscar   Wilde</small><a class="more" href="/author/wilde">about</a>
  <a class="tag" href="/tag/life/">life</a><a class="tag" href="/tag/self/">self</a>
  <span class="meta" data-likes="1,204">Price: £12.50 (3 left)</span></div>
<div class="quote"><span class="text">“So it goes.”</span>
  <small class="author">Kurt Vonnegut</small>
  <span class="meta" data-likes="n/a">Price: free</span></div>
<nav><ul class="pager"><li class="next"><a href="/page/2/">Next</a></li></ul></nav>
<a href="/login">Login</a>
</body></html>"""

CONFIG = r"""
[crawl]
[[crawl.selector_parsers]]
name = "quotes"
domain = "quotes.example"
pattern = "/page/*"
item_type = "quote"
item_css = "div.quote"
key = "text"
fields.text = { css = "span.text" }
fields.author = { css = "small.author" }
fields.author_url = { css = "a.more", attr = "href" }
fields.tags = { css = "a.tag", all = true }
fields.likes = { css = "span.meta", attr = "data-likes", type = "int" }
fields.price = { css = "span.meta", re = '£([\d.]+)', type = "decimal" }
fields.stock = { css = "span.meta", re = '\((\d+) left\)', type = "float" }
follow = [
  { pattern = '/page/\d+/', priority = 5 },
  { pattern = '/author/', css = "div.quote" },
]
"""


def page(html: str = QUOTES, url: str = "https://quotes.example/page/1/") -> FetchResult:
    return FetchResult(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html; charset=utf-8"},
        body=html.encode(),
        elapsed_s=0.0,
    )


def declaration() -> dict[str, Any]:
    declared: dict[str, Any] = tomllib.loads(CONFIG)["crawl"]["selector_parsers"][0]
    return declared


def test_items_per_match_with_types_regexes_and_keys() -> None:
    spec = selector_parser(declaration())
    result = spec.parse(page())
    assert [(item.type, item.key) for item in result.items] == [
        ("quote", "“Be yourself.”"),
        ("quote", "“So it goes.”"),
    ]
    assert result.items[0].data == {
        "text": "“Be yourself.”",
        "author": "Oscar Wilde",
        "author_url": "/author/wilde",
        "tags": ["life", "self"],
        "likes": 1204,
        "price": "12.50",
        "stock": 3.0,
    }
    second = result.items[1].data
    assert (second["author_url"], second["tags"], second["likes"]) == (None, [], None)
    assert (second["price"], second["stock"]) == (None, None)
    assert result.items[0].url == "https://quotes.example/page/1/"


def test_follow_rules_of_a_declaration() -> None:
    result = selector_parser(declaration()).parse(page())
    assert result.links == [
        Link("https://quotes.example/page/2/", 5),
        Link("https://quotes.example/author/wilde", 0),
    ]


def test_a_declaration_without_fields_only_follows_links() -> None:
    follow_only = {"name": "index", "domain": "quotes.example", "follow": declaration()["follow"]}
    result = selector_parser(follow_only).parse(page())
    assert result.items == []
    assert [link.url for link in result.links] == [
        "https://quotes.example/page/2/",
        "https://quotes.example/author/wilde",
    ]


def test_one_item_per_page_without_item_css_and_xpath_fields() -> None:
    spec = selector_parser(
        {
            "name": "page-summary",
            "pattern": "/page/*",
            "fields": {
                "title": {"xpath": "//title/text()"},
                "first_author": {"css": "small.author"},
                "tag_urls": {"xpath": "//a[@class='tag']/@href", "type": "list"},
                "next": {"xpath": "//li[@class='next']/a", "attr": "href"},
                "quote_html": {"css": "span.text", "attr": "html"},
            },
        }
    )
    assert spec.item_type == "page-summary"
    result = spec.parse(page())
    assert [item.data for item in result.items] == [
        {
            "title": "Quotes",
            "first_author": "Oscar Wilde",
            "tag_urls": ["/tag/life/", "/tag/self/"],
            "next": "/page/2/",
            "quote_html": '<span class="text">“Be yourself.”</span>',
        }
    ]
    assert result.items[0].key is None
    assert result.links == []


def test_selectolax_and_parsel_agree_on_text() -> None:
    fields = {"text": {"css": "div.quote"}, "html": {"css": "span.text", "attr": "html"}}
    css = selector_parser({"name": "a", "domain": "q.example", "fields": fields})
    both = selector_parser(
        {"name": "b", "domain": "q.example", "fields": {**fields, "x": {"xpath": "//title"}}}
    )
    data_css = css.parse(page()).items[0].data
    data_xpath = both.parse(page()).items[0].data
    assert data_css["text"] == data_xpath["text"]
    assert data_css["html"] == data_xpath["html"]


def test_non_html_and_broken_pages() -> None:
    spec = selector_parser(declaration())
    pdf = page()
    pdf.headers = {"content-type": "application/pdf"}
    assert spec.parse(pdf).items == []
    broken = page()
    # Bytes that are not UTF-8 (and not a byte order mark, which would name UTF-16).
    broken.body = b'\xff\xff<div class="quote"><span class="text">x\x80</span><small'
    assert [item.data["text"] for item in spec.parse(broken).items] == ["x\ufffd"]


def test_contract_and_sample_url_are_read() -> None:
    declared = declaration() | {
        "sample_url": "https://quotes.example/page/1/",
        "contract": {"min_items": 1, "required_fields": ["text"]},
    }
    spec = selector_parser(declared)
    assert spec.sample_url == "https://quotes.example/page/1/"
    assert spec.contract == Contract(min_items=1, required_fields=["text"])


def test_loaded_through_load_parsers() -> None:
    registry = load_parsers([], [declaration()], use_entry_points=False)
    assert registry.select("https://www.quotes.example/page/3/")[0] == "quotes"
    assert registry.select("https://quotes.example/login")[0] == "default"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"fields": {}, "follow": [], "key": None, "item_css": None},
            "'quotes': .*give fields .*, follow rules .*, or both",
        ),
        ({"fields": {}, "key": None}, "'quotes': .*item_css, item_json and key need fields"),
        ({"fields": {"a": {"attr": "href"}}}, "'quotes': fields.a: .*exactly one of css or xpath"),
        ({"fields": {"a": {"css": "a", "xpath": "//a"}}}, "fields.a: .*exactly one"),
        ({"fields": {"a": {"css": "a", "type": "date"}}}, "fields.a.type: "),
        ({"fields": {"a": {"css": "a", "re": "("}}}, "fields.a.re: .*is not accepted"),
        ({"fields": {"a": {"css": "a", "colour": "red"}}}, "fields.a.colour: Extra inputs"),
        ({"key": "nope"}, "key 'nope' is not one of the fields"),
        ({"follow": [{"pattern": "["}]}, r"follow.0.pattern: .*is not accepted"),
        ({"domain": None, "pattern": None}, "give a domain or a pattern"),
        ({"name": ""}, "'': name: "),
        ({"pattern": "re:("}, "quotes.* pattern.*is not accepted"),
    ],
)
def test_bad_declarations_name_the_parser_and_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_parsers([], [declaration() | change], use_entry_points=False)
