"""The declaration of a selector parser (``parsing.declarative``), validated by pydantic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from crawlfleet.errors import ConfigError
from crawlfleet.parsing.field_steps import Context as StepContext
from crawlfleet.parsing.field_steps import Step, compile_steps, run_steps
from crawlfleet.parsing.jsonpath import JsonPath, compile_path
from crawlfleet.parsing.plugins import Follow
from crawlfleet.parsing.selectors import Selection
from crawlfleet.patterns import Pattern, compile_pattern


def _valid_regex(value: str | None) -> str | None:
    if value is not None:
        try:
            compile_pattern(value, "regex")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    return value


def _valid_path(value: str | None) -> str | None:
    if value is not None:
        compile_path(value)
    return value


class FieldSpec(BaseModel):
    """How to read one field."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    css: str | None = None
    xpath: str | None = None
    json_path: str | None = Field(default=None, alias="json")
    context: str | None = None
    attr: str = "text"
    regex: str | None = Field(default=None, alias="re")
    type: Literal["str", "int", "float", "decimal", "list"] | None = None
    all: bool = False
    process: list[str | dict[str, Any]] = Field(default_factory=list)

    _check_regex = field_validator("regex")(_valid_regex)
    _check_paths = field_validator("json_path", "context")(_valid_path)
    _regex: Pattern | None = PrivateAttr(default=None)
    _path: JsonPath | None = PrivateAttr(default=None)
    _steps: tuple[Step, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _compile_steps(self) -> FieldSpec:
        self._steps = compile_steps(self.process)
        return self

    @model_validator(mode="after")
    def _one_selector(self) -> FieldSpec:
        sources = (self.css, self.xpath, self.json_path, self.context)
        if sum(source is not None for source in sources) != 1:
            raise ValueError("give exactly one of css or xpath (HTML), json (JSON) or context")
        path = self.json_path if self.json_path is not None else self.context
        if path is not None:
            self._path = compile_path(path)
        return self

    def _compiled_regex(self) -> Pattern:
        if self._regex is None:
            self._regex = compile_pattern(self.regex or "", "regex")
        return self._regex

    @property
    def many(self) -> bool:
        return self.all or self.type == "list"

    def read(self, scope: Selection | Any, context: Mapping[str, Any], base_url: str = "") -> Any:
        """The field's value in ``scope`` (a node, or a JSON value for ``json`` fields) or in
        ``context``: a value or None, or a list when ``many``; then its ``process`` steps,
        which resolve URLs against ``base_url``."""
        if self._path is not None:
            found = self._path.select(context if self.context is not None else scope)
            value = self._kept([self._json_value(value) for value in found])
        else:
            nodes = scope.css(self.css) if self.css is not None else scope.xpath(self.xpath or "")
            value = self._kept([self.convert(n.value(self.attr)) for n in nodes])
        return run_steps(self._steps, value, StepContext(base_url)) if self._steps else value

    def _kept(self, values: Sequence[Any]) -> Any:
        present = [value for value in values if value is not None]
        if self.many:
            return present
        return present[0] if present else None

    def _json_value(self, value: Any) -> Any:
        if self.type is None or value is None:
            return value
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return self.convert(text)

    def convert(self, raw: str | None) -> Any:
        if raw is None:
            return None
        if self.regex is not None:
            regex = self._compiled_regex()
            found = regex.search(raw)
            if found is None:
                return None
            raw = found.group(1) if regex.groups else found.group(0)
        if self.type in (None, "str", "list"):
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
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    pattern: str | None = None
    deny: str | None = None
    css: str | list[str] | None = None
    priority: int = 0
    fetcher: str | None = None
    json_path: str | None = Field(default=None, alias="json")
    url_template: str | None = None
    data: dict[str, FieldSpec] = Field(default_factory=dict)

    _check_regex = field_validator("pattern", "deny")(_valid_regex)
    _check_path = field_validator("json_path")(_valid_path)
    _path: JsonPath | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _json_or_links(self) -> FollowSpec:
        if self.json_path is None and self.url_template is not None:
            raise ValueError("url_template needs json (the path of the values it takes)")
        if self.json_path is not None and self.css is not None:
            raise ValueError("give json or css, not both")
        if self.url_template is not None and "{value}" not in self.url_template:
            raise ValueError("url_template must hold {value}")
        if self.json_path is not None:
            self._path = compile_path(self.json_path)
        return self

    @property
    def path(self) -> JsonPath:
        """The compiled ``json`` path (the empty path for a rule of HTML links)."""
        return self._path if self._path is not None else compile_path("")

    def rule(self) -> Follow:
        """The ``Follow`` of an HTML page's links (its ``data`` read by the caller)."""
        fields = self.model_dump(include={"pattern", "deny", "css", "priority", "fetcher"})
        return Follow(**fields)


class ContractSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_items: int = Field(default=0, ge=0)
    max_items: int | None = Field(default=None, ge=0)
    required_fields: list[str] = Field(default_factory=list)
    min_links: int = Field(default=0, ge=0)


class ExpectSpec(BaseModel):
    """What each page must hold (``parsing/expect.py``)."""

    model_config = ConfigDict(extra="forbid")

    selectors: list[str] = Field(default_factory=list)
    fields: list[str] = Field(default_factory=list)
    min_items: int = Field(default=0, ge=0)
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
    item_json: str | None = None
    fields: dict[str, FieldSpec] = Field(default_factory=dict)
    follow: list[FollowSpec] = Field(default_factory=list)
    sample_url: str | None = None
    contract: ContractSpec | None = None
    expect: ExpectSpec | None = None
    fetcher: str | None = None
    wait: str | None = None

    _check_path = field_validator("item_json")(_valid_path)

    @model_validator(mode="after")
    def _key_is_a_field(self) -> SelectorParserSpec:
        if self.key is not None and self.key not in self.fields:
            raise ValueError(f"key {self.key!r} is not one of the fields")
        if self.domain is None and self.pattern is None:
            raise ValueError("give a domain or a pattern (or both)")
        if not self.fields and not self.follow:
            raise ValueError("give fields (items), follow rules (links), or both")
        if not self.fields and (self.item_css or self.item_json or self.key):
            raise ValueError("item_css, item_json and key need fields (the items' values)")
        return self

    @model_validator(mode="after")
    def _json_or_html(self) -> SelectorParserSpec:
        specs = [*self.fields.values(), *(f for rule in self.follow for f in rule.data.values())]
        if not self.reads_json:
            if any(rule.json_path is not None for rule in self.follow):
                raise ValueError("follow rules with json need a JSON parser (json fields)")
            return self
        if self.item_css is not None or any(f.css or f.xpath for f in specs):
            raise ValueError("a JSON parser (json fields or item_json) cannot use css or xpath")
        if any(rule.json_path is None for rule in self.follow):
            raise ValueError("a JSON parser's follow rules need json (the path of the URLs)")
        return self

    @property
    def reads_json(self) -> bool:
        """Whether the parser reads JSON responses (else HTML).

        A follow-only parser (no fields) reads JSON when its rules do.
        """
        return (
            self.item_json is not None
            or any(f.json_path is not None for f in self.fields.values())
            or (not self.fields and any(rule.json_path is not None for rule in self.follow))
        )
