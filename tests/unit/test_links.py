"""Link extraction: resolution, base href, nofollow, meta robots, odd schemes, broken HTML."""

from __future__ import annotations

from dataclasses import fields
from html import escape

from hypothesis import given
from hypothesis import strategies as st

from crawlfleet.errors import BadUrl
from crawlfleet.models import CrawlRequest, Link, found_link, link_request
from crawlfleet.parsing.links import (
    RobotsMeta,
    base_url,
    extract_links,
    origin_of,
    parse_html,
    resolve,
    robots_meta,
)
from crawlfleet.urls import UrlRules

PAGE = "https://shop.example/list/page-2.html?sort=price"


def urls(html: str, page_url: str = PAGE, **kwargs: object) -> list[str]:
    return [link.url for link in extract_links(html, page_url, **kwargs)]  # type: ignore[arg-type]


def test_relative_absolute_and_area_links_resolve_against_the_page() -> None:
    html = """
      <a href="item-1.html">1</a> <a href="/p/2">2</a> <a href="../up.html">up</a>
      <a href="?page=3">3</a> <a href="//cdn.example/x">cdn</a>
      <a href="https://other.example/a#frag">other</a>
      <map><area href="/area" alt="a"></map>
    """
    assert urls(html) == [
        "https://shop.example/list/item-1.html",
        "https://shop.example/p/2",
        "https://shop.example/up.html",
        "https://shop.example/list/page-2.html?page=3",
        "https://cdn.example/x",
        "https://other.example/a",
        "https://shop.example/area",
    ]


def test_base_href_is_resolved_against_the_page_and_used() -> None:
    html = '<head><base href="/catalogue/"></head><a href="book.html">b</a><a href="/abs">a</a>'
    assert urls(html) == ["https://shop.example/catalogue/book.html", "https://shop.example/abs"]
    tree = parse_html(html)
    assert base_url(tree, PAGE) == "https://shop.example/catalogue/"


def test_absolute_base_href_on_another_host() -> None:
    html = '<base href="https://mirror.example/m/"><a href="x">x</a>'
    assert urls(html) == ["https://mirror.example/m/x"]


def test_empty_base_href_falls_back_to_the_page_url() -> None:
    assert urls('<base href=""><a href="x">x</a>') == ["https://shop.example/list/x"]


def test_skips_nofollow_odd_schemes_fragments_and_empty_hrefs() -> None:
    html = """
      <a href="/keep">k</a>
      <a href="/sponsored" rel="sponsored NoFollow">n</a>
      <a href="javascript:void(0)">js</a> <a href=" JavaScript:alert(1)">js2</a>
      <a href="mailto:a@b.example">m</a> <a href="tel:+100">t</a>
      <a href="data:text/html,hi">d</a> <a href="ftp://files.example/x">ftp</a>
      <a href="#top">frag</a> <a href="">empty</a> <a href="   ">blank</a> <a>none</a>
      <a href="file:///etc/passwd">file</a>
    """
    assert urls(html) == ["https://shop.example/keep"]


def test_file_links_are_kept_only_on_file_pages() -> None:
    assert urls('<a href="other.html">o</a>', "file:///tmp/site/index.html") == [
        "file:///tmp/site/other.html"
    ]


def test_duplicates_are_dropped_in_document_order() -> None:
    html = '<a href="/b">1</a><a href="/a">2</a><a href="/b#x">3</a><a href="/a">4</a>'
    assert urls(html) == ["https://shop.example/b", "https://shop.example/a"]


def test_meta_robots_nofollow_gives_no_links() -> None:
    html = '<head><meta name="ROBOTS" content="NoIndex, NoFollow"></head><a href="/x">x</a>'
    assert urls(html) == []
    assert robots_meta(parse_html(html)) == RobotsMeta(noindex=True, nofollow=True)


def test_meta_robots_none_and_other_metas() -> None:
    assert robots_meta(parse_html('<meta name="robots" content="none">')) == RobotsMeta(True, True)
    html = '<meta name="description" content="nofollow"><meta name="robots" content="noindex">'
    assert robots_meta(parse_html(html)) == RobotsMeta(noindex=True, nofollow=False)
    assert robots_meta(parse_html("<p>plain</p>")) == RobotsMeta()


def test_css_regions_restrict_links() -> None:
    html = """
      <nav><a href="/nav">n</a></nav>
      <ol class="products"><li><a href="/p/1">1</a></li><li><a href="/p/2">2</a></li></ol>
      <ul class="pager"><a href="/page-3">next</a></ul>
    """
    assert urls(html, css_regions=["ol.products"]) == [
        "https://shop.example/p/1",
        "https://shop.example/p/2",
    ]
    assert urls(html, css_regions=["ul.pager", "ol.products"])[0] == "https://shop.example/page-3"
    assert urls(html, css_regions=["div.absent"]) == []


def test_priority_and_fetcher_are_set_on_every_link() -> None:
    links = extract_links('<a href="/x">x</a>', PAGE, priority=5, fetcher="browser")
    assert links == [Link("https://shop.example/x", 5, "browser")]


def test_broken_html_and_bad_bytes_do_not_raise() -> None:
    body = b'<html><body><div><a href="/ok">\xff\xfe broken <p><a href="/two"<<<</div></tabl'
    assert urls(body)[0] == "https://shop.example/ok"  # type: ignore[arg-type]
    assert urls("") == []
    assert urls("<<<>>>&&&;") == []


def test_malformed_urls_are_skipped() -> None:
    assert urls('<a href="http://[::1">bad</a><a href="/fine">ok</a>') == [
        "https://shop.example/fine"
    ]


def test_origin_of() -> None:
    assert origin_of("https://u@h.example:8080/a?b") == "https://u@h.example:8080"
    assert origin_of("https://h.example?q=1") == "https://h.example"
    assert origin_of("file:///tmp/x") is None


HREF = st.one_of(
    st.text(alphabet="/.?#=&ab-_%:\t \\\u00e9\u00a0\u3000", max_size=20),
    st.sampled_from(["/a/./b", "/a/../b", "//host/x", "https://x.example/../y", "/p?q=/./"]),
).map(lambda tail: tail if tail[:1] in ("/", "h") else "/" + tail)


def _sent(url: str | None) -> str | None:
    """The URL the frontier requests for a resolved link (None for no URL)."""
    try:
        return UrlRules().target(url).url if url is not None else None
    except BadUrl:
        return None


@given(href=HREF)
def test_the_fast_path_agrees_with_the_whatwg_join(href: str) -> None:
    base = "https://shop.example/list/page.html"
    assert _sent(resolve(base, href, origin_of(base))) == _sent(resolve(base, href))


def test_extraction_gives_every_link_of_an_index_page() -> None:
    # An API index of 6,000 pages lost 1,000 of them to a cap of 5,000 in extraction; the
    # cap is now the parse budget's, which counts what it cuts (decision 0043).
    html = "<body>" + "".join(f'<a href="/p/{i}">{i}</a>' for i in range(6000))
    links = urls(html)
    assert len(links) == 6000
    assert links[-1] == "https://shop.example/p/5999"


def test_extraction_keeps_distinct_followable_links() -> None:
    html = '<a href="/same">a</a><a href="/same">b</a><a href="mailto:x@y">m</a><a href="/b">b</a>'
    assert urls(html) == ["https://shop.example/same", "https://shop.example/b"]


def test_a_found_link_is_the_link_its_constructor_builds() -> None:
    found = found_link("http://a.test/x", 3, "browser")
    built = Link("http://a.test/x", 3, "browser")
    # An unset slot (a field added to Link but not to found_link) would raise here.
    assert [getattr(found, f.name) for f in fields(Link)] == [
        getattr(built, f.name) for f in fields(Link)
    ]
    assert found == built
    assert found_link("http://a.test/") == Link("http://a.test/")


def test_a_base_after_the_links_still_applies_to_them() -> None:
    # The first <base href> in the document is the base of every link, before it or after.
    html = '<a href="x">x</a><base href="/first/"><base href="/second/"><a href="y">y</a>'
    assert urls(html) == ["https://shop.example/first/x", "https://shop.example/first/y"]


def test_a_meta_robots_nofollow_in_the_body_counts() -> None:
    assert urls('<body><a href="/x">x</a><meta name="robots" content="nofollow"></body>') == []


def test_an_href_written_twice_is_followed_if_either_copy_may_be() -> None:
    html = '<a href="/a#1" rel="nofollow">1</a><a href=" /a#2">2</a><a href="/a">3</a>'
    assert urls(html) == ["https://shop.example/a"]


def test_a_space_before_a_fragment_stays_in_the_url() -> None:
    # Resolving each href once without its fragment cut "/ #x" to "/ ", which the URL parser
    # strips to "/"; the space is inside the URL, escaped.
    html = '<a href="/ #x">1</a><a href="/a\t#y">2</a><a href=" b #">3</a>'
    assert urls(html) == [
        "https://shop.example/%20",
        "https://shop.example/a",
        "https://shop.example/list/b%20",
    ]


def test_an_absolute_href_equal_to_a_resolved_one_is_one_link() -> None:
    html = '<a href="https://shop.example/list/a">1</a><a href="a">2</a><a href="b">3</a>'
    assert urls(html) == ["https://shop.example/list/a", "https://shop.example/list/b"]
    html = '<a href="b">1</a><a href="https://shop.example/list/b">2</a>'
    assert urls(html) == ["https://shop.example/list/b"]


def test_a_link_request_is_the_request_its_constructor_builds() -> None:
    args = ("http://a.test/x", "f" * 32, "a.test", 2, 3, "browser", "http://a.test/")
    payload = ({"k": 1}, "POST", "q=1", {"X-A": "b"})
    built = CrawlRequest(*args[:5], 0, args[5], args[6], 0, *payload)
    made = link_request(*args, *payload)
    # An unset slot (a field added to CrawlRequest but not to link_request) would raise here.
    assert [getattr(made, f.name) for f in fields(CrawlRequest)] == [
        getattr(built, f.name) for f in fields(CrawlRequest)
    ]
    assert made == built


PAGE_NAME = st.sampled_from(["", "a.html", "b", "x.y", "c-d_e~"])
DIRECTORY = st.sampled_from(
    ["https://shop.example/", "http://h.test:8080/docs/api/", "https://shop.example/a/b/c/"]
)


@given(directory=DIRECTORY, first=PAGE_NAME, second=PAGE_NAME, href=HREF | st.text(max_size=8))
def test_a_directorys_pages_resolve_a_shared_href_as_each_alone_would(
    directory: str, first: str, second: str, href: str
) -> None:
    # Resolutions are cached per directory: the second page's must be its own.
    html = f'<a href="{escape(href)}">x</a>'
    node = parse_html(html).css_first("a")
    read = node.attributes["href"] if node is not None else None  # as the parser reads it
    for page in (directory + first, directory + second):
        expected = resolve(page, read)
        assert urls(html, page) == ([] if expected is None else [expected])
