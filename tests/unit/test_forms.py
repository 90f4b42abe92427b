"""``Response.form`` builds the request an HTML form would send; ``Response.json`` reads JSON."""

from __future__ import annotations

import pytest

from crawlfleet.models import CrawlRequest, FetchResult, Link
from crawlfleet.parsing.response import Response

PAGE_URL = "https://shop.test/search/?from=nav"

FORM = """
<form id="search" method="post" action="results?x=1">
  <input type="hidden" name="csrf_token" value="t0k3n">
  <input name="q" value="old">
  <input name="empty">
  <input type="checkbox" name="in_stock" checked>
  <input type="checkbox" name="sale" value="yes">
  <input type="radio" name="sort" value="price">
  <input type="radio" name="sort" value="name" checked>
  <select name="category"><option value="">any</option><option selected>Poetry</option></select>
  <select name="size"><option>small</option><option>large</option></select>
  <select name="colours" multiple><option>red</option></select>
  <textarea name="note">hi there</textarea>
  <input name="off" value="no" disabled>
  <input type="submit" name="go" value="Search">
  <input type="file" name="upload">
</form>
<form class="get" action="/find"><input name="q"><input type="hidden" name="page" value="1"></form>
<form class="self" method="POST"><input name="a" value="1"></form>
<form class="multi" method="post" enctype="multipart/form-data"><input name="f"></form>
<div class="not-a-form"></div>
"""


def page(body: str = FORM, *, url: str = PAGE_URL, content_type: str = "text/html") -> Response:
    return Response(FetchResult(url, url, 200, {"content-type": content_type}, body.encode(), 0.0))


def test_a_post_form_keeps_hidden_fields_and_takes_the_given_ones() -> None:
    link = page().form("#search", fields={"q": "garden", "extra": ["a", "b"], "note": None})
    assert link == Link(
        "https://shop.test/search/results?x=1",
        method="POST",
        body=(
            "csrf_token=t0k3n&q=garden&empty=&in_stock=on&sort=name&category=Poetry&size=small"
            "&extra=a&extra=b"
        ),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def test_a_get_form_puts_its_fields_in_the_query_with_a_context() -> None:
    link = page().form("form.get", {"q": "a b"}, data={"query": "a b"}, priority=3)
    assert (link.method, link.body, link.priority) == ("GET", "", 3)
    assert link.url == "https://shop.test/find?q=a+b&page=1"
    assert link.data == {"query": "a b"}


def test_a_form_without_action_posts_to_the_page_itself() -> None:
    assert page().form("form.self").url == PAGE_URL


def test_forms_that_cannot_be_built_are_errors() -> None:
    with pytest.raises(ValueError, match=r"no form matches 'form\.none'"):
        page().form("form.none")
    with pytest.raises(ValueError, match=r"no form matches 'div\.not-a-form'"):
        page().form("div.not-a-form")
    with pytest.raises(ValueError, match="form encoding 'multipart/form-data' is not supported"):
        page().form("form.multi")


def test_json_is_decoded_once_and_bad_json_names_the_url() -> None:
    response = page('{"products": [{"id": 1}], "next": null}', content_type="application/json")
    assert response.json() == {"products": [{"id": 1}], "next": None}
    assert response.json() is response.json()
    with pytest.raises(
        ValueError, match=r"https://shop.test/search/\?from=nav: the response is not JSON"
    ):
        page("<html>").json()


def test_the_context_is_the_requests_data_and_a_copy() -> None:
    request = CrawlRequest(PAGE_URL, "fp", "shop.test", data={"tags": ["a"]})
    result = FetchResult(PAGE_URL, PAGE_URL, 200, {}, b"", 0.0, request=request)
    response = Response(result)
    response.context["tags"].append("b")
    assert Response(result).context == {"tags": ["a"]}
    assert page().context == {}
    assert response.request is request
