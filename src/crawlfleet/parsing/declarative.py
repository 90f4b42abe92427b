"""Parsers declared with selectors instead of code (``selector_parsers`` in the crawl config).

One declaration, as TOML::

    [[crawl.selector_parsers]]
    name = "quotes"
    domain = "quotes.example"
    pattern = "/page/*"
    item_css = "div.quote"          # one item per match; absent: one item per page
    key = "text"                    # the field whose value is the item key
    fields.text = { css = "span.text" }
    fields.tags = { css = "a.tag", all = true }
    fields.url = { css = "a.more", attr = "href" }
    follow = [{ pattern = "/page/\\d+", priority = 1 }]

Without ``fields`` a declaration only follows links (no item), as a Scrapy
``Rule(follow=True)`` does: an index page whose links lead to the pages with the items.
A field reads ``attr`` (``"text"``, ``"html"`` or an attribute name) of the first node its
``css`` or ``xpath`` selects (of every node with ``all = true`` or ``type = "list"``), keeps
the first group of ``re`` (or its whole match) when given, then converts to ``type``:
``str``, ``int``, ``float``, ``decimal`` (an exact decimal string like ``"51.77"``), or
``list`` (strings). A value that does not convert is None. Then the field's ``process``
steps run in order (``parsing.field_steps``: strip, join, regex, number, price, date,
absolute_url, default). ``follow`` rules are those of ``parsing.plugins.Follow``; a rule's ``data`` is the context of the links it follows, its
values read like fields from the page (``data = { category = { css = "h1" } }``).

A field may instead read the page's context (``context = "category"``, a JSON path into
``response.context``: what the link that led here carried), or, for a JSON API, the
response's JSON (``json = "price.amount"``, a path of ``parsing.jsonpath``, relative to the
item): the value is kept as JSON gives it unless a ``type`` is given. A parser with
``json`` fields or ``item_json`` (the path of its items: each value selected is one item, a
list standing for its elements) reads JSON responses; a response that is not JSON is its
error. Its follow rules take URLs from the JSON::

    follow = [{ json = "next_cursor", url_template = "/api/products?cursor={value}" }]

follows, for every value the path selects (none for null: the last page), the template
with ``{value}`` URL-quoted, resolved against the page URL; without a template the value is
the URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import orjson
from pydantic import ValidationError

from crawlfleet.errors import ConfigError
from crawlfleet.models import FetchResult, Item, Link, ParseResult
from crawlfleet.parsing.declarative_spec import FollowSpec, SelectorParserSpec
from crawlfleet.parsing.expect import Expect, unmet
from crawlfleet.parsing.jsonpath import compile_path
from crawlfleet.parsing.plugins import Contract, Follow, ParserSpec, followed, unique
from crawlfleet.parsing.response import Response
from crawlfleet.parsing.selectors import Selection, document


class SelectorParser:
    """A ``Parser`` that runs a ``SelectorParserSpec`` on HTML pages or JSON responses."""

    def __init__(self, spec: SelectorParserSpec) -> None:
        self.spec = spec
        self.item_type = spec.item_type or spec.name
        specs = [*spec.fields.values(), *(f for rule in spec.follow for f in rule.data.values())]
        self.uses_xpath = any(field.xpath is not None for field in specs)
        self.resolves_urls = any(field.process for field in spec.fields.values())
        self.items_at = compile_path(spec.item_json) if spec.item_json is not None else None
        self.follow = tuple(self._html_rule(rule) for rule in spec.follow if not spec.reads_json)
        self.expect = Expect(**spec.expect.model_dump()) if spec.expect is not None else None

    def _html_rule(self, spec: FollowSpec) -> Follow:
        rule = spec.rule()
        if not spec.data:
            return rule

        def context(page: Response) -> dict[str, Any]:
            root = document(page, xpath=self.uses_xpath)
            return {name: field.read(root, page.context) for name, field in spec.data.items()}

        return replace(rule, data=context)

    def __call__(self, response: FetchResult) -> ParseResult:
        page = Response(response)
        parsed = self._parse(page)
        if self.expect is not None:
            parsed.unmet = unmet(self.expect, page, parsed)
        return parsed

    def _parse(self, page: Response) -> ParseResult:
        response = page.result
        if self.spec.reads_json:
            return self._parse_json(page)
        if not response.is_html:
            return ParseResult()
        links = followed(page, self.follow)
        if not self.spec.fields:
            return ParseResult(links=links)
        root = document(page, xpath=self.uses_xpath)
        scopes = root.css(self.spec.item_css) if self.spec.item_css else [root]
        items = [self._item(scope, page) for scope in scopes]
        return ParseResult(items=items, links=links)

    def _parse_json(self, page: Response) -> ParseResult:
        doc = page.json()
        scopes: list[Any] = [doc] if self.spec.fields else []
        if self.items_at is not None:
            scopes = []
            for value in self.items_at.select(doc):
                scopes.extend(value if isinstance(value, list) else [value])
        items = [self._item(scope, page) for scope in scopes]
        links = [link for rule in self.spec.follow for link in _json_links(rule, doc, page)]
        return ParseResult(items=items, links=unique(links))

    def _item(self, scope: Selection | Any, page: Response) -> Item:
        context = page.context
        base = page.base_url if self.resolves_urls and not self.spec.reads_json else page.url
        fields = self.spec.fields.items()
        data = {name: field.read(scope, context, base) for name, field in fields}
        key = data.get(self.spec.key) if self.spec.key is not None else None
        url = page.url
        return Item(type=self.item_type, data=data, key=None if key is None else str(key), url=url)


def _json_links(spec: FollowSpec, doc: Any, page: Response) -> list[Link]:
    """The links a JSON follow rule takes from ``doc``."""
    rule = spec.rule()
    values = spec.path.select(doc)
    data = {name: field.read(doc, page.context) for name, field in spec.data.items()}
    links = []
    for value in values:
        if value is None or isinstance(value, dict | list):
            continue
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        if spec.url_template is not None:
            text = spec.url_template.replace("{value}", quote(text, safe=""))
        url = page.urljoin(text)
        if rule.matches(url):
            links.append(Link(url, rule.priority, rule.fetcher, data))
    return links


def selector_parser(declaration: Mapping[str, Any]) -> ParserSpec:
    """The registry entry of one declaration; ``ConfigError`` names the parser and the field."""
    try:
        spec = SelectorParserSpec.model_validate(dict(declaration))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "declaration"
        name = declaration.get("name", "?")
        raise ConfigError(f"selector parser {name!r}: {where}: {first['msg']}") from None
    contract = Contract(**spec.contract.model_dump()) if spec.contract is not None else None
    return ParserSpec(
        name=spec.name,
        parse=SelectorParser(spec),
        domain=spec.domain,
        pattern=spec.pattern,
        item_type=spec.item_type or spec.name,
        sample_url=spec.sample_url,
        contract=contract,
        expect=Expect(**spec.expect.model_dump()) if spec.expect is not None else None,
        source="selector_parsers",
        fetcher=spec.fetcher,
        wait=spec.wait,
    )
