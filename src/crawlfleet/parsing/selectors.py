"""One way to select and read nodes, over selectolax (CSS only, fast) or parsel (CSS + XPath).

Declarative parsers use selectolax unless one of their selectors is XPath.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from selectolax.lexbor import LexborNode

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.response import Response

if TYPE_CHECKING:
    from parsel import Selector


class Selection(Protocol):
    """A document or element to select within.

    ``value`` reads ``"text"`` (the DOM's ``textContent``, whitespace runs made one space, as
    XPath's ``normalize-space``), ``"html"`` (outer HTML) or an
    attribute by name; None when the attribute is missing.
    """

    def css(self, selector: str) -> list[Selection]: ...

    def xpath(self, query: str) -> list[Selection]: ...

    def value(self, attr: str) -> str | None: ...


def _normalized(text: str) -> str:
    return " ".join(text.split())


class LexborSelection:
    """A selectolax node."""

    def __init__(self, node: LexborNode) -> None:
        self.node = node

    def css(self, selector: str) -> list[Selection]:
        return [LexborSelection(node) for node in self.node.css(selector)]

    def xpath(self, query: str) -> list[Selection]:
        raise ConfigError(f"XPath {query!r} needs the parsel backend")

    def value(self, attr: str) -> str | None:
        if attr == "text":
            return _normalized(self.node.text(deep=True))
        if attr == "html":
            return self.node.html
        return self.node.attributes.get(attr)


class ParselSelection:
    """A parsel selector: an element, or a text/attribute node selected by XPath."""

    def __init__(self, selector: Selector) -> None:
        self.selector = selector

    def css(self, selector: str) -> list[Selection]:
        return [ParselSelection(s) for s in self.selector.css(selector)]

    def xpath(self, query: str) -> list[Selection]:
        return [ParselSelection(s) for s in self.selector.xpath(query)]

    def value(self, attr: str) -> str | None:
        root = self.selector.root
        if isinstance(root, str):
            return root if attr == "html" else _normalized(root)
        if attr == "text":
            text: str | None = self.selector.xpath("normalize-space(.)").get()
            return text
        if attr == "html":
            return str(self.selector.get())
        return self.selector.attrib.get(attr)


def document(response: Response, *, xpath: bool) -> Selection:
    """The whole page, with the XPath-capable backend when ``xpath`` is needed."""
    if xpath:
        return ParselSelection(response.selector)
    return LexborSelection(response.tree.root or response.tree.create_node("html"))
