"""The parser port: a plain synchronous function of a response."""

from __future__ import annotations

from typing import Protocol

from crawlfleet.models import FetchResult, ParseResult


class Parser(Protocol):
    """Gets items and links from one response.

    Synchronous and free of I/O, so it can be tested offline on a saved page. An exception
    raised here is recorded (URL and traceback) and the crawl goes on.
    """

    def __call__(self, response: FetchResult) -> ParseResult: ...
