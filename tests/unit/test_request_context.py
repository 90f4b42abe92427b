"""A link's context reaches the parser of its target page, within ``max_context_bytes``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.models import FetchResult
from crawlfleet.parsing.plugins import Follow, Link, parser, spec_of
from crawlfleet.parsing.registry import ParserRegistry
from crawlfleet.parsing.response import Response
from crawlfleet.records import Outcome
from tests.fixtures.clock import FakeClock
from tests.unit.crawler_kit import T0, CannedFetcher, html, make_crawl, seed

A = "https://a.test"


def registry(*functions: Any) -> ParserRegistry:
    return ParserRegistry(spec_of(f, f.__crawlfleet_parser__, "test") for f in functions)


@parser(pattern="/aisle/*")
def aisle(response: Response) -> Iterator[Link]:
    category = response.css_first("title").text()  # type: ignore[union-attr]
    for node in response.css("a"):
        yield Link(node.attributes["href"] or "", data={"category": category, "tags": []})


@parser(pattern="/item/*")
def item(response: Response) -> dict[str, Any]:
    return {"key": response.url, **response.context}


async def test_the_target_parser_reads_the_context_of_its_link() -> None:
    clock = FakeClock(T0)
    pages = {
        f"{A}/aisle/1": html("/item/1", "/item/2", title="Poetry"),
        f"{A}/aisle/2": html("/item/3", title="Travel"),
        f"{A}/item/1": html(),
        f"{A}/item/2": html(),
        f"{A}/item/3": html(),
    }
    crawl = make_crawl(CannedFetcher(clock, pages), seeds=[A], parsers=registry(aisle, item))
    await seed(crawl, f"{A}/aisle/1", f"{A}/aisle/2")
    await crawl.run()
    stored = {row.item_key: row.data for row in await crawl.sink.stored("item")}
    assert stored == {
        f"{A}/item/{n}": {"key": f"{A}/item/{n}", "category": category, "tags": []}
        for n, category in ((1, "Poetry"), (2, "Poetry"), (3, "Travel"))
    }


@parser(pattern="/big")
def big(response: Response) -> Link:
    return Link("/item/1", data={"blob": "x" * 100})


@parser(pattern="/odd")
def odd(response: Response) -> Link:
    return Link("/item/1", data={"when": {1, 2}})


async def test_a_context_too_large_or_not_json_is_the_parsers_error() -> None:
    clock = FakeClock(T0)
    pages = {f"{A}/big": html(), f"{A}/odd": html(), f"{A}/item/1": html()}
    crawl = make_crawl(
        CannedFetcher(clock, pages),
        seeds=[A],
        parsers=registry(big, odd, item),
        max_context_bytes=64,
    )
    await seed(crawl, f"{A}/big", f"{A}/odd")
    await crawl.run()
    attempts = {a.url: a for a in await crawl.frontier.pending_attempts(10)}
    assert set(attempts) == {f"{A}/big", f"{A}/odd"}  # no link of either page was queued
    assert {a.outcome for a in attempts.values()} == {Outcome.PARSE_ERROR}
    assert attempts[f"{A}/big"].error == (
        f"parser 'big': ValueError: the context of {A}/item/1 is 111 bytes as JSON, "
        "over max_context_bytes (64)"
    )
    error = attempts[f"{A}/odd"].error or ""
    assert error.startswith(f"parser 'odd': ValueError: the context of {A}/item/1 is not JSON")


def page(body: str, url: str = f"{A}/list", **kw: Any) -> Response:
    headers = {"content-type": "text/html"}
    return Response(FetchResult(url, url, 200, headers, body.encode(), 0.0, **kw))


def test_follow_rules_give_their_links_a_context() -> None:
    rules = [
        Follow(pattern="/item/", data=lambda r: {"from": r.url}),
        Follow(pattern="/page/", data={"kind": "listing"}),
        Follow(pattern="/other/"),
    ]
    spec = spec_of(
        lambda r: None, parser(pattern="*", follow=rules)(lambda r: None).__crawlfleet_parser__, "t"
    )  # type: ignore[attr-defined]
    body = '<a href="/item/1">1</a><a href="/page/2">2</a><a href="/other/3">3</a>'
    result = FetchResult(
        f"{A}/list", f"{A}/list", 200, {"content-type": "text/html"}, body.encode(), 0.0
    )
    links = spec.parse(result).links
    assert [(link.url, dict(link.data)) for link in links] == [
        (f"{A}/item/1", {"from": f"{A}/list"}),
        (f"{A}/page/2", {"kind": "listing"}),
        (f"{A}/other/3", {}),
    ]


def test_links_are_one_per_method_url_and_body() -> None:
    @parser(pattern="*")
    def posts(response: Response) -> list[Link | str]:
        return [
            Link.post("/search", form={"q": "a"}),
            Link.post("/search", form={"q": "b"}),
            Link.post("/search", form={"q": "a"}, data={"ignored": True}),
            "/search",
            Link("/search", data={"ignored": True}),
        ]

    links = spec_of(posts, posts.__crawlfleet_parser__, "t").parse(page("").result).links  # type: ignore[attr-defined]
    assert [(link.method, link.url, link.body, dict(link.data)) for link in links] == [
        ("POST", f"{A}/search", "q=a", {}),
        ("POST", f"{A}/search", "q=b", {}),
        ("GET", f"{A}/search", "", {}),
    ]
