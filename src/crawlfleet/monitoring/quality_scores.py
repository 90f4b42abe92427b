"""Data quality scores from the store's counters, per parser and per (parser, domain).

A parser with expectations counts, on each page's first parse, ``quality.<p>.pages``,
``.met``, ``.items`` and ``.filled.<field>`` (``counters`` module docstring); per item type
the store counts items stored, invalid (failed validation) and duplicate. From them:

- ``met_share``: pages that met the parser's expectations, of its pages;
- ``items_per_page``; ``fill_rates``: per expected field, items filling it, of all items;
- per item type, ``invalid_share`` and ``duplicate_share`` of the items that reached the
  pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawlfleet.counters import CrawlStats

PREFIX = "quality."


@dataclass(slots=True)
class ParserScore:
    """One parser's quality figures over some pages."""

    pages: int = 0
    met: int = 0
    items: int = 0
    filled: dict[str, int] = field(default_factory=dict)

    @property
    def met_share(self) -> float | None:
        return self.met / self.pages if self.pages else None

    @property
    def items_per_page(self) -> float | None:
        return self.items / self.pages if self.pages else None

    def fill_rates(self) -> dict[str, float]:
        """Expected field -> share of items filling it."""
        if not self.items:
            return {}
        return {name: count / self.items for name, count in sorted(self.filled.items())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "pages": self.pages,
            "met_share": _round(self.met_share),
            "items_per_page": _round(self.items_per_page),
            "fill_rates": {name: round(rate, 4) for name, rate in self.fill_rates().items()},
        }


def scores(stats: CrawlStats) -> dict[str, ParserScore]:
    """Parser -> its score from ``stats``' counters (parsers with pages only)."""
    found: dict[str, ParserScore] = {}
    for name, value in stats.counters.items():
        if not name.startswith(PREFIX):
            continue
        parser, _, figure = name[len(PREFIX) :].partition(".")
        score = found.setdefault(parser, ParserScore())
        if figure == "pages":
            score.pages = int(value)
        elif figure == "met":
            score.met = int(value)
        elif figure == "items":
            score.items = int(value)
        elif figure.startswith("filled."):
            score.filled[figure[len("filled.") :]] = int(value)
    return {parser: score for parser, score in sorted(found.items()) if score.pages}


def item_type_scores(stats: CrawlStats) -> dict[str, dict[str, Any]]:
    """Item type -> items stored, invalid and duplicate, with the shares of the last two."""
    kinds = {kind: stats.items(kind) for kind in ("stored", "invalid", "duplicate")}
    report: dict[str, dict[str, Any]] = {}
    for item_type in sorted({t for counts in kinds.values() for t in counts}):
        counts = {kind: kinds[kind].get(item_type, 0) for kind in kinds}
        total = sum(counts.values())
        report[item_type] = {
            **counts,
            "invalid_share": _round(counts["invalid"] / total if total else None),
            "duplicate_share": _round(counts["duplicate"] / total if total else None),
        }
    return report


def quality_report(total: CrawlStats, domains: Mapping[str, CrawlStats]) -> dict[str, Any]:
    """The ``quality`` section of ``stats.json``: per parser (with its domains), per item type."""
    parsers: dict[str, Any] = {}
    for parser, score in scores(total).items():
        parsers[parser] = {**score.to_dict(), "domains": {}}
    for domain, stats in sorted(domains.items()):
        for parser, score in scores(stats).items():
            if parser in parsers:
                parsers[parser]["domains"][domain] = score.to_dict()
    return {"parsers": parsers, "item_types": item_type_scores(total)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
