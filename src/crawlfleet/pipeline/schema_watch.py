"""Schema drift at the sink: a new field, a type change, a field that stopped appearing.

Per item type, the first ``learn_items`` stored items are its schema: each field and the
JSON types its values had (``null`` left out). After that, each change is reported once,
with the URL of the first item (or items) that showed it:

- ``new field``: a field no learned item had;
- ``type change``: a value of a JSON type the field never had (``string`` -> ``number``);
- ``field gone``: a field every learned item had, missing from ``gone_after`` items in a row.

The watch lives in the process (each worker watches the items it stores). A type with more
than ``max_fields`` fields is watched on its first ``max_fields`` only, and that is reported
once too (no silent limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.models import Item

LEARN_ITEMS = 50
GONE_AFTER = 50
MAX_FIELDS = 200
EXAMPLES = 3


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One change of an item type's schema; ``urls``: the first items that showed it."""

    item_type: str
    change: str
    field: str
    detail: str
    urls: tuple[str, ...]

    def __str__(self) -> str:
        where = ", ".join(self.urls) or "?"
        return f"{self.item_type}: {self.change} {self.field!r} ({self.detail}; first: {where})"


def json_type(value: Any) -> str:
    """The JSON type of an item value: string, number, boolean, array, object or null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


@dataclass(slots=True)
class _TypeSchema:
    seen: int = 0
    types: dict[str, set[str]] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    missing_run: dict[str, list[str]] = field(default_factory=dict)
    reported: set[tuple[str, str]] = field(default_factory=set)
    over_cap: bool = False


class SchemaWatch:
    """Learns each item type's schema from its first items and reports changes once."""

    def __init__(
        self,
        learn_items: int = LEARN_ITEMS,
        gone_after: int = GONE_AFTER,
        max_fields: int = MAX_FIELDS,
    ) -> None:
        self._learn = learn_items
        self._gone_after = gone_after
        self._max_fields = max_fields
        self._types: dict[str, _TypeSchema] = {}

    def observe(self, items: Sequence[Item]) -> list[SchemaChange]:
        """Take stored items; the changes they showed first."""
        changes: list[SchemaChange] = []
        for item in items:
            schema = self._types.setdefault(item.type, _TypeSchema())
            schema.seen += 1
            if schema.seen <= self._learn:
                self._learn_from(schema, item, changes)
                if schema.seen == self._learn:
                    schema.required = {f for f, n in schema.present.items() if n == self._learn}
                continue
            self._check(schema, item, changes)
        return changes

    def _learn_from(self, schema: _TypeSchema, item: Item, changes: list[SchemaChange]) -> None:
        for name, value in item.data.items():
            if name not in schema.types and not self._room(schema, item, changes):
                continue
            schema.present[name] = schema.present.get(name, 0) + 1
            kind = json_type(value)
            if kind != "null":
                schema.types.setdefault(name, set()).add(kind)
            else:
                schema.types.setdefault(name, set())

    def _check(self, schema: _TypeSchema, item: Item, changes: list[SchemaChange]) -> None:
        url = item.url or "?"
        for name, value in item.data.items():
            kind = json_type(value)
            known = schema.types.get(name)
            if known is None:
                if not self._room(schema, item, changes):
                    continue
                schema.types[name] = set() if kind == "null" else {kind}
                self._report(schema, item.type, "new field", name, f"a {kind}", (url,), changes)
            elif kind != "null" and kind not in known:
                was = "/".join(sorted(known)) or "null"
                known.add(kind)
                change = f"type change:{kind}"
                self._report(schema, item.type, change, name, f"{was} -> {kind}", (url,), changes)
        for name in schema.required:
            if name in item.data:
                schema.missing_run.pop(name, None)
                continue
            run = schema.missing_run.setdefault(name, [])
            run.append(url)
            if len(run) == self._gone_after:
                detail = f"in all of the first {self._learn} items, in none of the last {len(run)}"
                urls = tuple(run[:EXAMPLES])
                self._report(schema, item.type, "field gone", name, detail, urls, changes)

    def _room(self, schema: _TypeSchema, item: Item, changes: list[SchemaChange]) -> bool:
        if len(schema.types) < self._max_fields:
            return True
        if not schema.over_cap:
            schema.over_cap = True
            detail = f"more than {self._max_fields} fields: the others are not watched"
            changes.append(SchemaChange(item.type, "too many fields", "*", detail, (item.url,)))
        return False

    @staticmethod
    def _report(
        schema: _TypeSchema,
        item_type: str,
        change: str,
        name: str,
        detail: str,
        urls: tuple[str, ...],
        changes: list[SchemaChange],
    ) -> None:
        if (change, name) in schema.reported:
            return
        schema.reported.add((change, name))
        shown = change.split(":", 1)[0]
        changes.append(SchemaChange(item_type, shown, name, detail, urls))
