"""Parser plugins: the mark, the wrapper, follow rules, specificity, loading, contracts."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from crawlfleet.errors import ConfigError, FetchError
from crawlfleet.models import FetchResult, Item, Link, ParseResult
from crawlfleet.parsing import (
    Contract,
    Expect,
    Follow,
    ParserRegistry,
    ParserSpec,
    Response,
    check_contracts,
    default_parser,
    load_parsers,
    parser,
)
from crawlfleet.parsing.plugins import marked, spec_of

LISTING = """<html><head><title>Books</title></head><body>
<nav><a href="/about">About</a></nav>
<ol class="products">
  <li><a class="book" href="/p/1">One</a> <span class="price">£10.50</span></li>
  <li><a class="book" href="/p/2">Two</a> <span class="price">£3.00</span></li>
</ol>
<ul class="pager"><a href="/list?page=2">next</a></ul>
<a href="/p/3" rel="nofollow">sponsored</a>
</body></html>"""


def page(html: str = LISTING, url: str = "https://shop.example/list") -> FetchResult:
    return FetchResult(
        url=url,
        final_url=url,
        status=200,
        headers={"content-type": "text/html"},
        body=html.encode(),
        elapsed_s=0.0,
    )


def spec(name: str, domain: str | None = None, pattern: str | None = None) -> ParserSpec:
    def parse(response: FetchResult) -> ParseResult:
        return ParseResult(items=[Item(type=name, data={})])

    return ParserSpec(name=name, parse=parse, domain=domain, pattern=pattern, source="test")


def wrapped(function: object) -> ParserSpec:
    meta = marked(function)
    assert meta is not None
    return spec_of(function, meta, "test")  # type: ignore[arg-type]


# The decorator and the wrapper


def test_decorator_only_marks_the_function() -> None:
    @parser("shop.example", "/p/*", name="product")
    def product(response: Response) -> dict[str, str]:
        return {"title": "x"}

    assert product(None) == {"title": "x"}  # type: ignore[arg-type]
    meta = marked(product)
    assert meta is not None
    assert (meta.domain, meta.pattern, meta.name) == ("shop.example", "/p/*", "product")
    assert marked(lambda r: None) is None


def test_dicts_become_items_of_the_item_type_keyed_by_key() -> None:
    @parser("shop.example", item_type="book")
    def books(response: Response) -> Iterator[object]:
        for li in response.css("ol.products li"):
            a = li.css_first("a")
            assert a is not None
            yield {"key": a.attributes["href"], "title": a.text()}
        yield Item(type="listing", data={"n": 2})
        yield "/list?page=2"
        yield Link("p/9", priority=3, fetcher="browser")

    result = wrapped(books).parse(page())
    assert [(i.type, i.key, i.url) for i in result.items] == [
        ("book", "/p/1", "https://shop.example/list"),
        ("book", "/p/2", "https://shop.example/list"),
        ("listing", None, "https://shop.example/list"),
    ]
    assert result.items[0].data == {"key": "/p/1", "title": "One"}
    assert result.links == [
        Link("https://shop.example/list?page=2"),
        Link("https://shop.example/p/9", 3, "browser"),
    ]


def test_item_type_defaults_to_the_parser_name_and_single_values_work() -> None:
    @parser("shop.example")
    def listing(response: Response) -> dict[str, str | None]:
        node = response.css_first("title")
        return {"title": node.text() if node else None}

    result = wrapped(listing).parse(page())
    assert [(i.type, i.data) for i in result.items] == [("listing", {"title": "Books"})]
    assert result.links == []  # no follow rules: no links but those returned


def test_none_output_and_xpath_helper() -> None:
    seen: list[str] = []

    @parser("shop.example")
    def quiet(response: Response) -> None:
        seen.extend(response.xpath("//span[@class='price']/text()").getall())

    assert wrapped(quiet).parse(page()) == ParseResult()
    assert seen == ["£10.50", "£3.00"]


def test_a_wrong_value_type_is_an_error_naming_the_parser() -> None:
    @parser("shop.example")
    def broken(response: Response) -> list[object]:
        return [1]

    with pytest.raises(TypeError, match="'broken' produced a int"):
        wrapped(broken).parse(page())


def test_follow_rules_pick_links_with_priorities_first_rule_wins() -> None:
    rules = [
        Follow(pattern=r"/p/\d+$", priority=10, fetcher="http"),
        Follow(css="ul.pager", priority=1),
        Follow(pattern="/about", deny="about"),
    ]

    @parser("shop.example", follow=rules)
    def listing(response: Response) -> list[object]:
        return ["/p/2"]

    result = wrapped(listing).parse(page())
    assert result.links == [
        Link("https://shop.example/p/2"),  # returned explicitly: kept as returned
        Link("https://shop.example/p/1", 10, "http"),
        Link("https://shop.example/list?page=2", 1, None),
    ]


def test_follow_rules_honour_meta_robots_and_skip_non_html() -> None:
    @parser("shop.example", follow=[Follow()])
    def everything(response: Response) -> None:
        return None

    blocked = '<meta name="robots" content="nofollow"><a href="/x">x</a>'
    assert wrapped(everything).parse(page(blocked)).links == []
    pdf = page()
    pdf.headers = {"content-type": "application/pdf"}
    assert wrapped(everything).parse(pdf).links == []


def test_bad_follow_regex_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="follow pattern"):
        Follow(pattern="(")


# Specificity


def test_most_specific_parser_wins() -> None:
    registry = ParserRegistry(
        [
            spec("any-p", None, "/p/*"),
            spec("shop", "shop.example"),
            spec("shop-p", "shop.example", "/p/*"),
            spec("shop-p-special", "shop.example", "/p/special/*"),
            spec("www", "www.shop.example"),
            spec("shop-re", "shop.example", r"re:^/item/\d+$"),
        ]
    )
    cases = {
        "https://shop.example/": "shop",
        "https://shop.example/p/1": "shop-p",
        "https://shop.example/p/special/1?x=1": "shop-p-special",
        "https://deep.shop.example/p/1": "shop-p",
        "https://www.shop.example/p/1": "www",
        "https://SHOP.example:8080/item/42": "shop-re",
        "https://shop.example/item/42x": "shop",
        "https://other.example/p/1": "any-p",
        "https://other.example/q": "default",
        "https://notshop.example/": "default",
        "not a url": "default",
    }
    assert {url: registry.select(url)[0] for url in cases} == cases
    assert registry.select("https://other.example/")[1] is default_parser


def test_pattern_matches_path_and_query() -> None:
    registry = ParserRegistry([spec("search", "shop.example", "/search?q=*")])
    assert registry.select("https://shop.example/search?q=books")[0] == "search"
    assert registry.select("https://shop.example/search")[0] == "default"


def test_equal_specificity_keeps_the_first_added() -> None:
    registry = ParserRegistry(
        [spec("first", "a.example", "/x*"), spec("second", "a.example", "/*x")]
    )
    assert registry.select("https://a.example/xx")[0] == "first"


def test_clashing_names_and_claims_are_config_errors() -> None:
    registry = ParserRegistry([spec("a", "x.example")])
    with pytest.raises(ConfigError, match="two parsers named 'a'"):
        registry.add(spec("a", "y.example"))
    with pytest.raises(ConfigError, match="both claim"):
        registry.add(spec("b", "X.example."))
    with pytest.raises(ConfigError, match="reserved"):
        registry.add(spec("default", "z.example"))
    with pytest.raises(ConfigError, match="is not accepted"):
        registry.add(spec("c", "z.example", "re:("))


def test_get_by_name() -> None:
    registry = ParserRegistry([spec("a", "x.example")])
    assert registry.get("a")[0] == "a"
    assert registry.get("default") == ("default", default_parser)
    with pytest.raises(ConfigError, match="known: default, a"):
        registry.get("nope")


class Book(BaseModel):
    title: str


class OtherBook(BaseModel):
    name: str


def test_schemas_by_item_type() -> None:
    @parser("a.example", item_type="book", schema=Book)
    def one(response: Response) -> None:
        return None

    @parser("b.example", item_type="book", schema=Book)
    def two(response: Response) -> None:
        return None

    @parser("c.example", item_type="book", schema=OtherBook)
    def three(response: Response) -> None:
        return None

    registry = ParserRegistry([wrapped(one), wrapped(two)])
    assert registry.schemas() == {"book": Book}
    registry.add(wrapped(three))
    with pytest.raises(ConfigError, match="two schemas"):
        registry.schemas()


# Loading

PLUGIN = """
from crawlfleet.parsing import Follow, parser

@parser("books.example", "/catalogue/*", name="{name}", follow=[Follow(pattern="catalogue")])
def book(response):
    yield {{"key": response.url, "title": response.css_first("h1").text()}}

def not_a_parser(response):
    return None
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_load_from_a_py_file_and_a_dotted_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = write(tmp_path / "books_file.py", PLUGIN.format(name="books-file"))
    package = tmp_path / "pkg_cf_parsers"
    package.mkdir()
    write(package / "__init__.py", "")
    write(package / "shop.py", PLUGIN.replace("books.example", "shop.example").format(name="shop"))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_parsers([str(file), "pkg_cf_parsers.shop"])
    assert [s.name for s in registry.specs] == ["books-file", "shop"]
    assert registry.specs[0].source == str(file)
    name, parse = registry.select("https://books.example/catalogue/a.html")
    result = parse(page("<h1>A</h1><a href='/catalogue/b.html'>b</a><a href='/x'>x</a>"))
    assert name == "books-file"
    assert [i.data["title"] for i in result.items] == ["A"]
    assert [link.url for link in result.links] == ["https://shop.example/catalogue/b.html"]
    # loading again (as another worker would) finds the same parsers
    again = load_parsers([str(file), "pkg_cf_parsers.shop"])
    assert [s.name for s in again.specs] == ["books-file", "shop"]
    sys.modules.pop("pkg_cf_parsers.shop", None)
    sys.modules.pop("pkg_cf_parsers", None)


def test_a_module_with_a_syntax_error_is_a_config_error_naming_it(tmp_path: Path) -> None:
    bad = write(tmp_path / "broken_parser.py", "def oops(:\n    pass\n")
    with pytest.raises(ConfigError, match=r"broken_parser\.py.*SyntaxError"):
        load_parsers([str(bad)])


def test_a_module_raising_on_import_is_a_config_error_with_the_last_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "raising_parser.py", "raise RuntimeError('no config here')\n")
    with pytest.raises(ConfigError, match="RuntimeError: no config here"):
        load_parsers([str(bad)])


def test_missing_module_and_file_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'no_such_parsers_module'.*ModuleNotFoundError"):
        load_parsers(["no_such_parsers_module"])
    with pytest.raises(ConfigError, match="not found"):
        load_parsers([str(tmp_path / "absent.py")])


def test_no_entry_points_installed_gives_an_empty_registry() -> None:
    registry = load_parsers([])
    assert len(registry) == 0
    assert registry.select("https://any.example/")[0] == "default"


def test_entry_points_are_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "ep_cf_parsers.py", PLUGIN.format(name="from-entry-point"))
    dist = tmp_path / "ep_cf_parsers-1.0.dist-info"
    dist.mkdir()
    write(dist / "METADATA", "Metadata-Version: 2.1\nName: ep-cf-parsers\nVersion: 1.0\n")
    write(dist / "entry_points.txt", "[crawlfleet.parsers]\nbooks = ep_cf_parsers\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = load_parsers([])
    assert [s.name for s in registry.specs] == ["from-entry-point"]
    assert "entry point 'books'" in registry.specs[0].source
    assert len(load_parsers([], use_entry_points=False)) == 0
    sys.modules.pop("ep_cf_parsers", None)


def test_selector_parsers_are_added_after_modules() -> None:
    declared = {"name": "quotes", "domain": "q.example", "fields": {"t": {"css": "h1"}}}
    registry = load_parsers([], [declared], use_entry_points=False)
    assert registry.select("https://q.example/")[0] == "quotes"


# Contracts


async def test_contracts_pass_and_fail() -> None:
    pages = {
        "https://shop.example/list": page(),
        "https://shop.example/empty": page("<p>nothing</p>", "https://shop.example/empty"),
    }

    async def fetch(url: str) -> FetchResult:
        if url not in pages:
            raise FetchError(f"connection refused: {url}")
        return pages[url]

    contract = Contract(min_items=2, max_items=5, required_fields=["title", "price"], min_links=1)

    def books(response: Response) -> Iterator[object]:
        for li in response.css("ol.products li"):
            title, price = li.css_first("a"), li.css_first(".price")
            yield {"title": title and title.text(), "price": price and price.text()}
        yield "/list?page=2"

    def declared(name: str, domain: str, pattern: str | None, url: str | None) -> object:
        def parse(response: Response) -> Iterator[object]:
            return books(response)

        return parser(domain, pattern, name=name, sample_url=url, contract=contract)(parse)

    good = declared("good", "shop.example", "/list", "https://shop.example/list")
    empty = declared("empty", "shop.example", "/empty", "https://shop.example/empty")
    gone = declared("gone", "gone.example", None, "https://gone.example/")
    untested = declared("untested", "x.example", None, None)
    registry = ParserRegistry(wrapped(f) for f in (good, empty, gone, untested))
    reports = {r.parser: r for r in await check_contracts(registry, fetch)}
    assert set(reports) == {"good", "empty", "gone"}
    assert reports["good"].ok
    assert (reports["good"].items, reports["good"].links) == (2, 1)
    assert reports["empty"].problems == ("0 items, expected at least 2",)
    assert reports["gone"].problems == ("fetch failed: connection refused: https://gone.example/",)


async def test_a_raising_parser_and_an_error_status_break_the_contract() -> None:
    async def fetch(url: str) -> FetchResult:
        result = page(url=url)
        result.status = 404 if "missing" in url else 200
        return result

    def boom(response: Response) -> None:
        raise ValueError("selector drifted")

    def fine(response: Response) -> None:
        return None

    registry = ParserRegistry(
        [
            wrapped(parser("a.example", name="boom", sample_url="https://a.example/")(boom)),
            wrapped(parser("b.example", name="404", sample_url="https://b.example/missing")(fine)),
        ]
    )
    reports = await check_contracts(registry, fetch)
    assert [r.problems for r in reports] == [
        ("parser raised ValueError: selector drifted",),
        ("sample page answered HTTP 404",),
    ]


async def test_a_sample_page_that_misses_the_expectations_breaks_the_check() -> None:
    async def fetch(url: str) -> FetchResult:
        return page(url=url)

    def nothing(response: Response) -> None:
        return None

    expect = Expect(selectors=("div.product",), min_items=1)
    mark = parser("a.example", name="shop", sample_url="https://a.example/", expect=expect)
    (report,) = await check_contracts(ParserRegistry([wrapped(mark(nothing))]), fetch)
    assert report.problems == (
        "expectation missed: selector 'div.product'",
        "expectation missed: items: 0 < 1",
    )


def test_public_api() -> None:
    import crawlfleet.parsing as package

    exported: dict[str, object] = {}
    exec("from crawlfleet.parsing import *", exported)
    assert set(exported) - {"__builtins__"} == set(package.__all__)
