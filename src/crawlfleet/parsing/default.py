"""The parser used for every URL no plugin claims: page metadata and every followable link."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from crawlfleet.models import FetchResult, Item, ParseResult
from crawlfleet.parsing.encoding import html_input, sniff
from crawlfleet.parsing.links import base_url, extract_links, resolve, robots_meta

PAGE_ITEM = "page"
RESOURCE_ITEM = "resource"


def iso_utc(epoch_s: float) -> str | None:
    """``epoch_s`` as ISO 8601 UTC with milliseconds; None for 0 (the time was not recorded)."""
    if not epoch_s:
        return None
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")


def title_of(tree: LexborHTMLParser) -> str | None:
    node = tree.css_first("title")
    if node is None:
        return None
    return " ".join(node.text(deep=True).split()) or None


def canonical_of(tree: LexborHTMLParser, base: str, encoding: str = "utf-8") -> str | None:
    """The absolute URL of ``<link rel="canonical">``, if any."""
    for node in tree.css("link[rel][href]"):
        attrs = node.attributes
        if "canonical" in (attrs.get("rel") or "").lower().split():
            return resolve(base, attrs.get("href"), encoding=encoding)
    return None


def default_parser(response: FetchResult) -> ParseResult:
    """One ``page`` item and the page's links for HTML; one ``resource`` item for the rest.

    A page with ``<meta name="robots" content="noindex">`` gives no item (its links are still
    followed unless it also says ``nofollow``). The item key is ``response.url``, the URL the
    crawler requested.
    """
    if not response.is_html:
        return ParseResult(items=[resource_item(response)])
    source = html_input(response)  # HTML5 rules: BOM, header, meta, detector
    tree = LexborHTMLParser(source)
    encoding = "utf-8"
    if isinstance(source, str):  # not UTF-8: the page's codec encodes its links' queries
        encoding = sniff(response.body, response.headers.get("content-type")).codec
    links = extract_links(tree, response.final_url, encoding=encoding)
    if robots_meta(tree).noindex:
        return ParseResult(links=links)
    data: dict[str, Any] = {
        "url": response.url,
        "final_url": response.final_url,
        "status": response.status,
        "title": title_of(tree),
        "canonical": canonical_of(tree, base_url(tree, response.final_url, encoding), encoding),
        "fetched_at": iso_utc(response.fetched_at),
    }
    item = Item(type=PAGE_ITEM, data=data, key=response.url, url=response.url)
    return ParseResult(items=[item], links=links)


def resource_item(response: FetchResult) -> Item:
    """Metadata of a non-HTML response (its body is not kept)."""
    data: dict[str, Any] = {
        "url": response.url,
        "final_url": response.final_url,
        "status": response.status,
        "content_type": response.content_type or None,
        "bytes": len(response.body),
        "fetched_at": iso_utc(response.fetched_at),
    }
    return Item(type=RESOURCE_ITEM, data=data, key=response.url, url=response.url)
