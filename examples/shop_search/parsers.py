"""The search example: a POST form with a CSRF token, and its result pages, each a POST.

``search_form`` fills the shop's search form (``response.form``: its hidden ``csrf_token``
kept, ``q`` given) and carries the query as context; ``results`` yields one ``hit`` per
result and submits the page's "more results" form, whose hidden fields hold the next page.
Every result page is a POST to the same URL with another body: the fingerprint covers the
method and body, so each is a request of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from crawlfleet.parsing.plugins import Link, parser
from crawlfleet.parsing.response import Response

SHOP_HOST = "127.0.0.2"  # the demo shop, on any port
QUERY = "garden"


@parser(SHOP_HOST, pattern="/search/")
def search_form(response: Response) -> Link:
    return response.form("form#search", fields={"q": QUERY}, data={"query": QUERY})


@parser(SHOP_HOST, pattern="/search/results", item_type="hit")
def results(response: Response) -> Iterator[dict[str, Any] | Link]:
    for node in response.css("li.result"):
        anchor = node.css_first("a")
        price = node.css_first("span.price")
        yield {
            "key": node.attributes.get("data-id"),
            "name": anchor.text(strip=True) if anchor is not None else None,
            "price": price.text(strip=True) if price is not None else None,
            "query": response.context["query"],
        }
    if response.css_first("form.more") is not None:
        yield response.form("form.more", data=response.context)
