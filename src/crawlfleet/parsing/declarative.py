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

A field reads ``attr`` (``"text"``, ``"html"`` or an attribute name) of the first node its
``css`` or ``xpath`` selects (of every node with ``all = true`` or ``type = "list"``), keeps
the first group of ``re`` (or its whole match) when given, then converts to ``type``:
``str``, ``int``, ``float``, ``decimal`` (an exact decimal string like ``"51.77"``), or
``list`` (strings). A value that does not convert is None. Then the field's ``process``
steps run in order (``parsing.field_steps``: strip, join, regex, number, price, date,
absolute_url, default). ``follow`` rules are those of ``parsing.plugins.Follow``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from crawlfleet.errors import ConfigError
from crawlfleet.models import FetchResult, Item, ParseResult
from crawlfleet.parsing.field_steps import Context, Step, compile_steps, run_steps
from crawlfleet.parsing.plugins import Contract, Follow, ParserSpec, followed
from crawlfleet.parsing.response import Response
from crawlfleet.parsing.selectors import Selection, document
from crawlfleet.patterns import Pattern, compile_pattern


def _valid_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            compile_pattern(value, "regex")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


class FieldSpec(BaseModel):
    """How to read one field."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    css: str | None = None
    xpath: str | None = None
    attr: str = "text"
    regex: str | None = Field(default=None, alias="re")
    type: Literal["str", "int", "float", "decimal", "list"] = "str"
    all: bool = False
    process: list[str | dict[str, Any]] = Field(default_factory=list)

    _check_regex = field_validator("regex")(_valid_regex)
    _regex: Pattern | None = PrivateAttr(default=None)
    _steps: tuple[Step, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _compile_steps(self) -> FieldSpec:
        self._steps = compile_steps(self.process)
        return self

    @model_validator(mode="after")
    def _one_selector(self) -> FieldSpec:
        if (self.css is None) == (self.xpath is None):
            raise ValueError("give exactly one of css or xpath")
        return self

    def _compiled_regex(self) -> Pattern:
        if self._regex is None:
            self._regex = compile_pattern(self.regex or "", "regex")
        return self._regex

    @property
    def many(self) -> bool:
        return self.all or self.type == "list"

    def read(self, scope: Selection, base_url: str = "") -> Any:
        """The field's value in ``scope``: a value or None, or a list when ``many``; its
        ``process`` steps resolve URLs against ``base_url``."""
        nodes = scope.css(self.css) if self.css is not None else scope.xpath(self.xpath or "")
        values = []
        for node in nodes if self.many else nodes[:1]:
            value = self.convert(node.value(self.attr))
            if value is not None:
                values.append(value)
        value = values if self.many else (values[0] if values else None)
        return run_steps(self._steps, value, Context(base_url)) if self._steps else value

    def convert(self, raw: str | None) -> Any:
        if raw is None:
            return None
        if self.regex is not None:
            regex = self._compiled_regex()
            found = regex.search(raw)
            if found is None:
                return None
            raw = found.group(1) if regex.groups else found.group(0)
        if self.type in ("str", "list"):
            return raw
        number = raw.strip().replace(",", "").replace("_", "")
        try:
            if self.type == "int":
                return int(number)
            if self.type == "float":
                return float(number)
            return format(Decimal(number), "f")
        except (ValueError, InvalidOperation):
            return None


class FollowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pattern: str | None = None
    deny: str | None = None
    css: str | list[str] | None = None
    priority: int = 0
    fetcher: str | None = None

    _check_regex = field_validator("pattern", "deny")(_valid_regex)


class ContractSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_items: int = Field(default=0, ge=0)
    max_items: int | None = Field(default=None, ge=0)
    required_fields: list[str] = Field(default_factory=list)
    min_links: int = Field(default=0, ge=0)


class SelectorParserSpec(BaseModel):
    """One parser declaration."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    domain: str | None = None
    pattern: str | None = None
    item_type: str | None = None
    key: str | None = None
    item_css: str | None = None
    fields: dict[str, FieldSpec] = Field(min_length=1)
    follow: list[FollowSpec] = Field(default_factory=list)
    sample_url: str | None = None
    contract: ContractSpec | None = None

    @model_validator(mode="after")
    def _key_is_a_field(self) -> SelectorParserSpec:
        if self.key is not None and self.key not in self.fields:
            raise ValueError(f"key {self.key!r} is not one of the fields")
        if self.domain is None and self.pattern is None:
            raise ValueError("give a domain or a pattern (or both)")
        return self


class SelectorParser:
    """A ``Parser`` that runs a ``SelectorParserSpec`` on HTML pages."""

    def __init__(self, spec: SelectorParserSpec) -> None:
        self.spec = spec
        self.item_type = spec.item_type or spec.name
        self.follow = tuple(Follow(**rule.model_dump()) for rule in spec.follow)
        self.uses_xpath = any(field.xpath is not None for field in spec.fields.values())

    def __call__(self, response: FetchResult) -> ParseResult:
        if not response.is_html:
            return ParseResult()
        page = Response(response)
        root = document(page, xpath=self.uses_xpath)
        scopes = root.css(self.spec.item_css) if self.spec.item_css else [root]
        items = [self._item(scope, response.url, page.base_url) for scope in scopes]
        return ParseResult(items=items, links=followed(page, self.follow))

    def _item(self, scope: Selection, url: str, base_url: str) -> Item:
        data = {name: field.read(scope, base_url) for name, field in self.spec.fields.items()}
        key = data.get(self.spec.key) if self.spec.key is not None else None
        return Item(type=self.item_type, data=data, key=None if key is None else str(key), url=url)


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
        source="selector_parsers",
    )
