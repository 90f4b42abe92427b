"""The quotes example: quotes and their authors from the demo quotes site (quotes-to-scrape-like).

``quotes`` reads the home page and the paginated quote lists: one ``quote`` item per quote
(keyed by its text), following the next pages and each quote's author page, nothing else (no
tag pages, no login). ``author`` turns an author page into one ``author`` item keyed by the
slug in its URL (``/author/Mara-Quillfeather/`` -> ``Mara-Quillfeather``). Each quote carries
that key as ``author_key``, so grouping quotes by author is a join on one field.

The demo quotes site always listens on 127.0.0.3 (the port varies), and a parser's ``domain``
is matched against the host only, so ``domain=QUOTES_HOST`` claims it on any port.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, Field

from crawlfleet.parsing import Contract, Follow, Response, parser
from crawlfleet.pipeline.dates import to_iso

QUOTES_HOST = "127.0.0.3"
SAMPLE = f"http://{QUOTES_HOST}:8800"  # `crawlfleet demo-site` on its default port

LIST_PATH = r"/page/\d+/$"
AUTHOR_PATH = r"/author/([^/?#]+)/$"
CURLY_QUOTES = "“”\"'"


class Quote(BaseModel):
    text: str = Field(min_length=1)
    author: str = Field(min_length=1)
    author_key: str = Field(min_length=1, description="the key of the author item")
    tags: list[str]


class Author(BaseModel):
    name: str = Field(min_length=1)
    born_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="ISO 8601 date")
    born_location: str = Field(min_length=1)
    description: str
    url: str


@parser(
    QUOTES_HOST,
    pattern=f"re:^/$|^{LIST_PATH}",
    item_type="quote",
    schema=Quote,
    follow=[
        Follow(pattern=AUTHOR_PATH, css="div.quote", priority=10),
        Follow(pattern=LIST_PATH, priority=0),
    ],
    sample_url=f"{SAMPLE}/page/1/",
    contract=Contract(min_items=10, required_fields=["text", "author", "author_key"], min_links=2),
)
def quotes(response: Response) -> Iterator[dict[str, Any]]:
    """One ``quote`` item per ``div.quote``; the text without its curly quotes."""
    for quote in response.css("div.quote"):
        text_node = quote.css_first("span.text")
        author_node = quote.css_first("small.author")
        about = quote.css_first('a[href*="/author/"]')
        text = text_node.text(strip=True).strip(CURLY_QUOTES) if text_node else None
        yield {
            "key": text,
            "text": text,
            "author": author_node.text(strip=True) if author_node else None,
            "author_key": _author_key(response.urljoin(about.attributes.get("href") or ""))
            if about is not None
            else None,
            "tags": [tag.text(strip=True) for tag in quote.css("a.tag")],
        }


@parser(
    QUOTES_HOST,
    pattern=f"re:^{AUTHOR_PATH}",
    item_type="author",
    schema=Author,
    sample_url=f"{SAMPLE}/author/Mara-Quillfeather/",
    contract=Contract(min_items=1, max_items=1, required_fields=["name", "born_date"]),
)
def author(response: Response) -> Iterator[dict[str, Any]]:
    """One ``author`` item; born date as ISO 8601, location without its leading "in"."""
    details = response.css_first("div.author-details")
    if details is None:
        return
    location = _text(details.css_first("span.author-born-location"))
    yield {
        "key": _author_key(response.url),
        "name": _text(details.css_first("h3.author-title")),
        "born_date": to_iso(_text(details.css_first("span.author-born-date"))),
        "born_location": re.sub(r"^in\s+", "", location) if location else None,
        "description": _text(details.css_first("div.author-description")),
        "url": response.url,
    }


def _author_key(url: str) -> str | None:
    """The slug of an author page URL."""
    found = re.search(AUTHOR_PATH, url)
    return found.group(1) if found else None


def _text(node: Any) -> str | None:
    return node.text(strip=True) if node is not None else None
