"""Data quality of a crawl: items per page, invalid rate, duplicates, field fill rates."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.models import Item
from crawlfleet.pipeline.processors import DUPLICATE


@dataclass(slots=True)
class _Tally:
    pages: int = 0
    stored: int = 0
    invalid: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def add(self, stored: int, dropped: Mapping[str, int], invalid: int) -> None:
        self.pages += 1
        self.stored += stored
        self.invalid += invalid
        self.dropped.update(dropped)

    def summary(self) -> dict[str, Any]:
        produced = self.stored + self.invalid + sum(self.dropped.values())
        return {
            "pages": self.pages,
            "items": self.stored,
            "items_per_page": round(self.stored / self.pages, 3) if self.pages else 0.0,
            "invalid": self.invalid,
            "invalid_rate": round(self.invalid / produced, 4) if produced else 0.0,
            "duplicates": self.dropped[DUPLICATE],
            "dropped": dict(sorted(self.dropped.items())),
        }


@dataclass(slots=True)
class _Fill:
    items: int = 0
    filled: Counter[str] = field(default_factory=Counter)


class DataQuality:
    """Counts the pipeline updates once per page; ``snapshot`` reports them.

    A field is *filled* when present and not None, "" or an empty list/dict. Fill rates are
    per item type over stored items, for every field seen in at least one item of the type.
    """

    def __init__(self) -> None:
        self._crawl = _Tally()
        self._domains: defaultdict[str, _Tally] = defaultdict(_Tally)
        self._fill: defaultdict[str, _Fill] = defaultdict(_Fill)

    def record_page(
        self, domain: str, stored: Sequence[Item], dropped: Mapping[str, int], invalid: int
    ) -> None:
        """Counts one page's outcome: the items stored, drops per reason, invalid items."""
        self._crawl.add(len(stored), dropped, invalid)
        self._domains[domain].add(len(stored), dropped, invalid)
        for item in stored:
            fill = self._fill[item.type]
            fill.items += 1
            for name, value in item.data.items():
                fill.filled[name] += _is_filled(value)  # an empty field still gets a rate

    def snapshot(self) -> dict[str, Any]:
        """The crawl's totals, plus ``domains`` (same totals per domain) and ``fill_rate``."""
        return {
            **self._crawl.summary(),
            "fill_rate": {
                item_type: {
                    name: round(count / fill.items, 4)
                    for name, count in sorted(fill.filled.items())
                }
                for item_type, fill in sorted(self._fill.items())
            },
            "domains": {domain: tally.summary() for domain, tally in sorted(self._domains.items())},
        }


def _is_filled(value: object) -> bool:
    return value is not None and value != "" and value != [] and value != {}
