"""Per-site parsers written as plain functions: the ``@parser`` mark and its wrapper.

``@parser`` only records its arguments on the function; ``parsing.loader`` finds marked
functions in the modules it is given and builds a ``ParserRegistry``. There is no global
registry.

The function receives a ``Response`` and returns, or yields, any mix of:

- ``Item``: stored as is (its ``url`` defaults to the response URL);
- ``dict``: an ``Item`` of the parser's ``item_type`` (default: the parser's name), keyed by
  its ``key`` field when it has one;
- ``Link`` or ``str``: a URL to follow, resolved against the page's base URL. A ``Link``
  may carry a context (``Link(url, data={...})``: the target's parser reads it as
  ``response.context``), a method, body and headers (``Link.post``, ``response.form``).

Link following: links the function returns are always followed. Without ``follow`` rules
nothing else is. With rules, every link of the page (see ``parsing.links``: nofollow and
meta robots honoured) that matches a rule is followed too, with that rule's priority and
fetcher; the first matching rule wins and links matching no rule are dropped. A rule's
``data`` (a dict, or a function of the response returning one) is the context of the links
it follows.

Links are kept once per (method, URL, body), the first occurrence winning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from crawlfleet.models import FetchResult, Item, Link, ParseResult, Revisit
from crawlfleet.parsing.expect import Expect, unmet
from crawlfleet.parsing.protocols import Parser
from crawlfleet.parsing.response import Response
from crawlfleet.patterns import Pattern, compile_pattern

MARK = "__crawlfleet_parser__"

PluginFunction = Callable[[Response], Any]
ContextOf = Mapping[str, Any] | Callable[[Response], Mapping[str, Any]]

__all__ = ["Contract", "Expect", "Follow", "Link", "Revisit", "parser"]


def compile_regex(pattern: str, what: str) -> Pattern:
    """``pattern`` compiled (RE2: linear time, see ``crawlfleet.patterns``); a bad one is a
    ``ConfigError`` naming ``what``."""
    return compile_pattern(pattern, what)


@dataclass(frozen=True, slots=True)
class Follow:
    """A link-following rule: which links of a page to follow, and how urgently.

    ``pattern`` and ``deny`` are regexes searched in the absolute URL (no ``pattern``: every
    URL); ``css`` restricts the rule to links inside matching elements. ``data`` is the
    context of the links followed: a dict, or a function of the page returning one.
    """

    pattern: str | None = None
    deny: str | None = None
    css: str | Sequence[str] | None = None
    priority: int = 0
    fetcher: str | None = None
    data: ContextOf | None = None
    _allow: Pattern | None = field(init=False, repr=False, compare=False)
    _deny: Pattern | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        allow = compile_regex(self.pattern, "follow pattern") if self.pattern else None
        deny = compile_regex(self.deny, "follow deny") if self.deny else None
        object.__setattr__(self, "_allow", allow)
        object.__setattr__(self, "_deny", deny)

    @property
    def regions(self) -> tuple[str, ...]:
        if self.css is None:
            return ()
        return (self.css,) if isinstance(self.css, str) else tuple(self.css)

    def matches(self, url: str) -> bool:
        if self._deny is not None and self._deny.search(url):
            return False
        return self._allow is None or self._allow.search(url) is not None

    def context(self, response: Response) -> dict[str, Any]:
        """The context of the links this rule follows on ``response``."""
        if self.data is None:
            return {}
        return dict(self.data(response) if callable(self.data) else self.data)


@dataclass(frozen=True, slots=True)
class Contract:
    """What a parser must get from its ``sample_url``, checked by ``crawlfleet check``.

    ``required_fields`` must be present and not empty in every item.
    """

    min_items: int = 0
    max_items: int | None = None
    required_fields: Sequence[str] = ()
    min_links: int = 0


@dataclass(frozen=True, slots=True)
class ParserMeta:
    """What ``@parser`` records on a function."""

    domain: str | None = None
    pattern: str | None = None
    name: str | None = None
    item_type: str | None = None
    schema: type[BaseModel] | None = None
    follow: tuple[Follow, ...] = ()
    sample_url: str | None = None
    contract: Contract | None = None
    fetcher: str | None = None
    wait: str | None = None
    expect: Expect | None = None


@dataclass(frozen=True, slots=True)
class ParserSpec:
    """A parser and the URLs it claims, as the registry holds it.

    ``domain`` matches the host and its subdomains; ``pattern`` is a glob on path+query, or a
    regex after ``re:``. ``source`` names where it was loaded from, for messages.
    ``fetcher`` fetches the pages it claims (``http``, ``browser``, ``auto``; None: a follow
    rule's, the domain's, else HTTP); ``wait`` is their browser wait rule
    (``wait_rules.wait_rule_problem``; None: the crawl's ``browser_wait``).
    ``expect``: what each of its pages must hold (``parsing/expect.py``; its parser checks it).
    """

    name: str
    parse: Parser
    domain: str | None = None
    pattern: str | None = None
    item_type: str | None = None
    schema: type[BaseModel] | None = None
    sample_url: str | None = None
    contract: Contract | None = None
    source: str = ""
    fetcher: str | None = None
    wait: str | None = None
    expect: Expect | None = None


def parser(
    domain: str | None = None,
    pattern: str | None = None,
    *,
    name: str | None = None,
    item_type: str | None = None,
    schema: type[BaseModel] | None = None,
    follow: Sequence[Follow] = (),
    sample_url: str | None = None,
    contract: Contract | None = None,
    fetcher: str | None = None,
    wait: str | None = None,
    expect: Expect | None = None,
) -> Callable[[PluginFunction], PluginFunction]:
    """Mark a function as the parser of ``domain`` (and subdomains) and ``pattern`` URLs.

    ``fetcher`` (``http``, ``browser``, ``auto``) fetches its pages and ``wait`` is their
    browser wait rule (``load``, ``domcontentloaded``, ``networkidle``, ``css:SELECTOR``).
    ``expect``: what each page must hold, else it ends as ``mismatch`` (``parsing/expect.py``).
    """
    meta = ParserMeta(
        domain,
        pattern,
        name,
        item_type,
        schema,
        tuple(follow),
        sample_url,
        contract,
        fetcher,
        wait,
        expect,
    )

    def mark(function: PluginFunction) -> PluginFunction:
        setattr(function, MARK, meta)
        return function

    return mark


def marked(value: object) -> ParserMeta | None:
    """The ``@parser`` arguments of ``value``, or None if it is not a marked function."""
    meta = getattr(value, MARK, None) if callable(value) else None
    return meta if isinstance(meta, ParserMeta) else None


def spec_of(function: PluginFunction, meta: ParserMeta, source: str) -> ParserSpec:
    """The registry entry of a marked function."""
    name = meta.name or function.__name__
    item_type = meta.item_type or name
    wrapped = PluginParser(
        function, name=name, item_type=item_type, follow=meta.follow, expect=meta.expect
    )
    return ParserSpec(
        name=name,
        parse=wrapped,
        domain=meta.domain,
        pattern=meta.pattern,
        item_type=item_type,
        schema=meta.schema,
        sample_url=meta.sample_url,
        contract=meta.contract,
        source=source,
        fetcher=meta.fetcher,
        wait=meta.wait,
        expect=meta.expect,
    )


class PluginParser:
    """A plugin function turned into a ``Parser``; it checks its ``expect`` on every page."""

    def __init__(
        self,
        function: PluginFunction,
        *,
        name: str,
        item_type: str,
        follow: Sequence[Follow],
        expect: Expect | None = None,
    ) -> None:
        self.function = function
        self.name = name
        self.item_type = item_type
        self.follow = tuple(follow)
        self.expect = expect

    def __call__(self, response: FetchResult) -> ParseResult:
        page = Response(response)
        parsed = ParseResult()
        for value in _values(self.function(page)):
            if isinstance(value, Item):
                value.url = value.url or page.url
                parsed.items.append(value)
            elif isinstance(value, dict):
                parsed.items.append(item_from_dict(value, self.item_type, page.url))
            elif isinstance(value, Link):
                parsed.links.append(replace(value, url=page.urljoin(value.url)))
            elif isinstance(value, str):
                parsed.links.append(Link(page.urljoin(value)))
            elif isinstance(value, Revisit):
                parsed.revisit = value
            else:
                raise TypeError(
                    f"parser {self.name!r} produced a {type(value).__name__}; "
                    "expected Item, dict, Link, str or Revisit"
                )
        follows = followed(page, self.follow)  # GETs, each URL once
        parsed.links = unique(parsed.links + follows) if parsed.links else follows
        if self.expect is not None:
            parsed.unmet = unmet(self.expect, page, parsed)
        return parsed


def item_from_dict(data: dict[str, Any], item_type: str, url: str) -> Item:
    """An item of ``item_type`` keyed by ``data["key"]`` when present."""
    key = data.get("key")
    return Item(type=item_type, data=data, key=None if key is None else str(key), url=url)


def followed(response: Response, rules: Sequence[Follow]) -> list[Link]:
    """The page's links matching ``rules`` (first matching rule wins), for HTML pages."""
    if not rules or not response.result.is_html:
        return []
    taken: set[str] = set()
    links: list[Link] = []
    for rule in rules:
        context: dict[str, Any] | None = None
        for link in response.links(rule.regions):
            if link.url not in taken and rule.matches(link.url):
                taken.add(link.url)
                if context is None:
                    context = rule.context(response)
                if context or rule.priority != link.priority or rule.fetcher != link.fetcher:
                    link = Link(link.url, rule.priority, rule.fetcher, context)
                links.append(link)  # as extracted when the rule adds nothing: a Link is frozen
    return links


def unique(links: Iterable[Link]) -> list[Link]:
    """``links`` with each (method, URL, body) once, the first occurrence kept."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for link in links:
        if link.identity not in seen:
            seen.add(link.identity)
            kept.append(link)
    return kept


def _values(output: object) -> Iterable[object]:
    if output is None:
        return ()
    if isinstance(output, Item | dict | Link | str):
        return (output,)
    if isinstance(output, Iterable):
        return output
    return (output,)
