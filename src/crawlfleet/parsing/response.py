"""The response a plugin parser receives: a ``FetchResult`` with selector helpers."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

import orjson
from selectolax.lexbor import LexborHTMLParser, LexborNode

from crawlfleet.errors import ConfigError
from crawlfleet.models import CrawlRequest, FetchResult, Link
from crawlfleet.parsing.encoding import Encoding, html_input, sniff, text_of
from crawlfleet.parsing.forms import FieldValue, form_link
from crawlfleet.parsing.links import RobotsMeta, base_url, extract_links, robots_meta
from crawlfleet.urls import join

if TYPE_CHECKING:
    from parsel import Selector, SelectorList

T = TypeVar("T")


class lazy(Generic[T]):
    """``functools.cached_property`` without its lock: Python 3.11's is one lock per property
    for every instance, so a page's tree built in a parse thread (lexbor lets the GIL go)
    held every other page's, the event loop's included, until it was done (decision 0058).
    A ``Response`` is read by one thread at a time."""

    def __init__(self, func: Callable[[Any], T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object, owner: type | None = None) -> T | Self:
        if instance is None:
            return self
        value = self.func(instance)
        instance.__dict__[self.name] = value  # found before this descriptor from now on
        return value


class Response:
    """One fetched page; the HTML is parsed once, on first use.

    ``css`` uses selectolax (fast); ``xpath`` uses parsel, from the ``xpath`` extra.
    """

    def __init__(self, result: FetchResult) -> None:
        self.result = result
        self._links: dict[tuple[str, ...], list[Link]] = {}

    @property
    def url(self) -> str:
        """The URL requested (as the page that linked it wrote it, serialized: ``crawlfleet.urls``)."""
        return self.result.url

    @property
    def final_url(self) -> str:
        """The URL after redirects; relative links resolve against it (or ``<base>``)."""
        return self.result.final_url

    @property
    def status(self) -> int:
        return self.result.status

    @property
    def request(self) -> CrawlRequest | None:
        """The request fetched (its method, body, headers), when the fetcher had one."""
        return self.result.request

    @lazy
    def context(self) -> dict[str, Any]:
        """The ``data`` of the link that led here (``Link(url, data={...})``); empty for a
        seed. A copy: changing it changes nothing stored."""
        request = self.result.request
        return copy.deepcopy(request.data) if request is not None else {}

    @property
    def headers(self) -> dict[str, str]:
        return self.result.headers

    @property
    def body(self) -> bytes:
        return self.result.body

    @lazy
    def text(self) -> str:
        """The body decoded as a browser would (``parsing.encoding``: BOM, header, meta)."""
        return text_of(self.result)

    @lazy
    def tree(self) -> LexborHTMLParser:
        return LexborHTMLParser(html_input(self.result, self._sniffed))

    @lazy
    def encoding(self) -> str:
        """The Python codec the body is read with (``parsing.encoding``)."""
        return self._sniffed.codec

    @lazy
    def _sniffed(self) -> Encoding:
        result = self.result
        return sniff(result.body, result.headers.get("content-type"), html=result.is_html)

    @lazy
    def base_url(self) -> str:
        return base_url(self.tree, self.final_url, self.encoding)

    @lazy
    def robots(self) -> RobotsMeta:
        return robots_meta(self.tree)

    @lazy
    def selector(self) -> Selector:
        """The page as a parsel ``Selector``; raises ``ConfigError`` without parsel."""
        try:
            from parsel import Selector  # the optional xpath extra
        except ImportError:
            raise ConfigError("XPath needs parsel: pip install 'crawlfleet[xpath]'") from None
        return Selector(text=self.text, base_url=self.final_url)

    def css(self, selector: str) -> list[LexborNode]:
        return self.tree.css(selector)

    def css_first(self, selector: str) -> LexborNode | None:
        return self.tree.css_first(selector)

    def xpath(self, query: str) -> SelectorList[Selector]:
        return self.selector.xpath(query)

    def json(self) -> Any:
        """The body as JSON (decoded once); ``ValueError`` naming the URL when it is not."""
        return self._document

    @lazy
    def _document(self) -> Any:
        try:
            return orjson.loads(self.result.body)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{self.url}: the response is not JSON: {exc}") from None

    def form(
        self,
        selector: str = "form",
        fields: Mapping[str, FieldValue] | None = None,
        *,
        data: Mapping[str, Any] | None = None,
        priority: int = 0,
    ) -> Link:
        """The request submitting the first form matching ``selector``, hidden fields kept,
        ``fields`` filled in (see ``parsing.forms``); ``data`` is its context.

        Raises ``ValueError`` when no form matches (or the selector matches another element).
        """
        node = self.css_first(selector)
        if node is None or node.tag != "form":
            raise ValueError(f"{self.url}: no form matches {selector!r}")
        return form_link(node, self.base_url, self.final_url, fields or {}, data or {}, priority)

    def urljoin(self, href: str) -> str:
        """``href`` made absolute against the page's base URL as a browser does
        (``urls.join``); ``href`` as given when it is no URL (the frontier refuses it with
        the reason)."""
        return join(self.base_url, href, self.encoding) or href

    def links(self, css_regions: Sequence[str] = ()) -> list[Link]:
        """The followable links of the page (see ``parsing.links``), computed once per regions."""
        regions = tuple(css_regions)
        if regions not in self._links:
            self._links[regions] = extract_links(
                self.tree, self.final_url, css_regions=regions, encoding=self.encoding
            )
        return self._links[regions]
