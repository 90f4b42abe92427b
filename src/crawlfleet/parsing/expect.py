"""What a parser's page must hold (``@parser(expect=...)``), checked on every page it parses.

A page that misses any part of its parser's ``Expect`` ends as ``mismatch`` (not ``ok``): its
items are not stored, it is retried like a transient failure (a half-loaded page) and, past
its retries, dead-lettered under the class ``mismatch: <parser>``. ``unmet`` names the
missing parts, one short stable text each; the drift detector (``runtime/step/drift.py``) watches
how often pages mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crawlfleet.errors import ConfigError
from crawlfleet.models import Item, ParseResult
from crawlfleet.parsing.response import Response

EMPTY: tuple[object, ...] = (None, "", [], {})
"""Values that leave a field unfilled."""


@dataclass(frozen=True, slots=True)
class Expect:
    """What every page a parser handles must give.

    ``selectors``: CSS selectors that must each match at least one element (HTML pages; a
    page that is not HTML matches none). ``fields``: fields every item must fill (present and
    not ``None``, ``""``, ``[]`` or ``{}``). ``min_items`` / ``min_links``: at least that many
    items / links from the page.
    """

    selectors: Sequence[str] = ()
    fields: Sequence[str] = ()
    min_items: int = 0
    min_links: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.selectors, str) or isinstance(self.fields, str):
            raise ConfigError("expect: selectors and fields are lists, not one string")
        if self.min_items < 0 or self.min_links < 0:
            raise ConfigError("expect: min_items and min_links must be >= 0")
        object.__setattr__(self, "selectors", tuple(self.selectors))
        object.__setattr__(self, "fields", tuple(self.fields))


def filled(item: Item, field: str) -> bool:
    """Whether ``item`` fills ``field``."""
    return item.data.get(field) not in EMPTY


def unmet(expect: Expect, page: Response, parsed: ParseResult) -> tuple[str, ...]:
    """The parts of ``expect`` the page and what its parser got miss, in ``expect``'s order."""
    missing: list[str] = []
    html = page.result.is_html
    for selector in expect.selectors:
        if not html or page.css_first(selector) is None:
            missing.append(f"selector {selector!r}")
    items = parsed.items
    if len(items) < expect.min_items:
        missing.append(f"items: {len(items)} < {expect.min_items}")
    if len(parsed.links) < expect.min_links:
        missing.append(f"links: {len(parsed.links)} < {expect.min_links}")
    for field in expect.fields:
        empty = sum(not filled(item, field) for item in items)
        if empty:
            missing.append(f"field {field!r} ({empty} of {len(items)} items)")
    return tuple(missing)


def reason_of(missing: str) -> str:
    """The stable part of a missing-part text (counts dropped): a sample page is kept per
    (parser, reason)."""
    return (
        missing.split(":", 1)[0]
        if missing.startswith(("items:", "links:"))
        else (missing.split(" (", 1)[0])
    )
