"""The standard processors: plain callables ``(Item) -> Item`` that may raise ``DropItem``.

Configurable ones are factories (``normalize_price(["price"])``) returning a processor.
Every processor returns a new ``Item`` and leaves its input untouched. A processor that finds
the item's data wrong raises ``InvalidItem``: the pipeline records it (count, reason, url and
data in the rejects store) instead of dropping it silently.
"""

from __future__ import annotations

import html
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urljoin

import pydantic

from crawlfleet.errors import DropItem
from crawlfleet.models import Item
from crawlfleet.pipeline.dates import DEFAULT_FORMATS, to_iso
from crawlfleet.pipeline.hashing import content_hash, item_key
from crawlfleet.pipeline.prices import Price, parse_price
from crawlfleet.pipeline.protocols import Processor
from crawlfleet.pipeline.text import NUL

DUPLICATE = "duplicate"
"""The drop reason of ``dedupe``."""

DEDUPE_KEYS = 100_000
"""Identities ``dedupe`` remembers by default: ~22 MB (1,000,000 took ~225 MB, the largest
thing a long crawl held; docs/decisions/0017)."""


class InvalidItem(DropItem):
    """The item's data is wrong; the pipeline keeps it as a reject with this reason."""


def clean_text(item: Item) -> Item:
    """Every string in the data, nested too: HTML-unescaped, NUL removed, NFC, spaces collapsed.

    NUL goes as every sink would remove it anyway (``text.strip_nul``), so what later
    processors see is what is stored.
    """
    return replace(item, data={name: _clean(value) for name, value in item.data.items()})


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        text = html.unescape(value).replace(NUL, "")
        return " ".join(unicodedata.normalize("NFC", text).split())
    if isinstance(value, list | tuple):
        return [_clean(element) for element in value]
    if isinstance(value, dict):
        return {name: _clean(element) for name, element in value.items()}
    return value


def normalize_price(fields: Iterable[str], *, default_currency: str | None = None) -> Processor:
    """Turns each of ``fields`` into ``{"amount": "51.77", "currency": "GBP"}``.

    A missing or None field is left alone; a number keeps ``default_currency``; a text with no
    number makes the item invalid.
    """
    names = tuple(fields)

    def process(item: Item) -> Item:
        data = dict(item.data)
        for name in names:
            value = data.get(name)
            if value is None or isinstance(value, dict):
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                price: Price | None = Price(format(Decimal(str(value)), "f"), default_currency)
            else:
                price = parse_price(str(value), default_currency=default_currency)
            if price is None:
                raise InvalidItem(f"{name}: not a price: {str(value)[:80]!r}")
            data[name] = price.to_dict()
        return replace(item, data=data)

    return process


def absolute_urls(fields: Iterable[str]) -> Processor:
    """Resolves each of ``fields`` (a URL, or a list of URLs) against ``item.url``."""
    names = tuple(fields)

    def process(item: Item) -> Item:
        data = dict(item.data)
        for name in names:
            value = data.get(name)
            if isinstance(value, str):
                data[name] = urljoin(item.url, value.strip())
            elif isinstance(value, list):
                data[name] = [
                    urljoin(item.url, url.strip()) if isinstance(url, str) else url for url in value
                ]
        return replace(item, data=data)

    return process


def iso_dates(fields: Iterable[str], *, formats: Sequence[str] = DEFAULT_FORMATS) -> Processor:
    """Rewrites each of ``fields`` as ISO 8601; a value that is no date makes the item invalid.

    ``formats`` (``strptime`` syntax) are tried after ISO 8601, RFC 2822 and epoch seconds.
    """
    names = tuple(fields)

    def process(item: Item) -> Item:
        data = dict(item.data)
        for name in names:
            value = data.get(name)
            if value is None:
                continue
            iso = to_iso(value, formats)
            if iso is None:
                raise InvalidItem(f"{name}: not a date: {str(value)[:80]!r}")
            data[name] = iso
        return replace(item, data=data)

    return process


def validate(schemas: Mapping[str, type[pydantic.BaseModel]]) -> Processor:
    """Validates items whose type has a schema; their data becomes the model's JSON dump.

    Items of other types pass unchanged. A failure raises ``InvalidItem`` naming every bad field.
    """

    def process(item: Item) -> Item:
        schema = schemas.get(item.type)
        if schema is None:
            return item
        try:
            model = schema.model_validate(item.data)
        except pydantic.ValidationError as exc:
            raise InvalidItem(_describe(exc)) from None
        return replace(item, data=model.model_dump(mode="json"))

    return process


def _describe(exc: pydantic.ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "item"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


@runtime_checkable
class StatefulProcessor(Protocol):
    """A processor that remembers the items it passed.

    When storing fails, the pipeline calls ``forget`` with the items of that attempt (as they
    left the last processor), so a retry of the page is not refused for having been seen.
    """

    def __call__(self, item: Item) -> Item: ...

    def forget(self, items: Sequence[Item]) -> None: ...


class Dedupe:
    """Drops an item whose (type, key) was seen before with the same content, the key being
    its content hash if unset.

    An item seen again with other content passes: a recrawl (``--continuous``) found a new
    version of it. Remembers the ``max_keys`` most recently seen identities; older ones are
    forgotten, so a very old duplicate passes (the sinks upsert by key, so it is stored once
    anyway). Put it last: ``forget`` recognises a keyless item by the content it has after
    every processor.
    """

    def __init__(self, *, max_keys: int = DEDUPE_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be >= 1")
        self._max_keys = max_keys
        self._seen: OrderedDict[tuple[str, str], str] = OrderedDict()

    def __call__(self, item: Item) -> Item:
        try:
            identity = (item.type, item_key(item))
            version = content_hash(item.data)
        except TypeError as exc:  # orjson.JSONEncodeError: no content hash without JSON
            raise InvalidItem(f"not JSON-serializable: {exc}") from None
        if self._seen.get(identity) == version:
            self._seen.move_to_end(identity)
            raise DropItem(DUPLICATE)
        self._seen[identity] = version
        self._seen.move_to_end(identity)
        if len(self._seen) > self._max_keys:
            self._seen.popitem(last=False)
        return item

    def forget(self, items: Sequence[Item]) -> None:
        for item in items:
            self._seen.pop((item.type, item_key(item)), None)


def dedupe(*, max_keys: int = DEDUPE_KEYS) -> Dedupe:
    """A ``Dedupe`` processor remembering at most ``max_keys`` identities."""
    return Dedupe(max_keys=max_keys)


def default_processors(
    schemas: Mapping[str, type[pydantic.BaseModel]] | None = None,
    own: Sequence[Processor] = (),
) -> list[Processor]:
    """What a crawl runs: clean text, validate (if schemas), the crawl's ``own`` processors
    (``pipeline.custom``) in their order, dedupe (last: see ``Dedupe``)."""
    steps: list[Processor] = [clean_text]
    if schemas:
        steps.append(validate(schemas))
    steps.extend(own)
    steps.append(dedupe())
    return steps
