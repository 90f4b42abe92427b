"""The drift test of one (parser, domain), as the store keeps it (decision 0051).

A one-sided Bernoulli CUSUM on "this page missed its parser's expectations", against a
baseline mismatch share it learns from the pair's pages. Its state lives in the domain's
record in the store (``QueueStore.observe_drift``), so every process of a crawl feeds one
test and a resumed or recrawled crawl keeps its baseline. The in-memory and SQLite stores
step it with ``DriftTest.observe``; the Redis store with ``lua/drift.lua``, which does the
same arithmetic (the shared contract tests check the two agree).

Besides the test's figures, the state keeps the items and each expected field's filled
count of the pages that left the statistic at 0 (the baseline) and of the current run (the
pages since it was last 0): the field diff a drift is shown with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from crawlfleet.frontier.drift_marks import mark_key

BASELINE_FLOOR = 0.02
BASELINE_CAP = 0.2
"""Bounds of the learned baseline share: a perfect history still allows odd pages, and a
parser broken from its first page still fires."""
DRIFT_SHARE = 0.5
"""The mismatch share the test is tuned to detect (half the pages or more)."""
THRESHOLD = 15.0
"""The CUSUM level that fires (decision 0051: measured false alarms and delays)."""


@dataclass(frozen=True, slots=True)
class DriftPage:
    """One page's first parse as the drift test takes it: whether it missed its parser's
    expectations, its items and, per expected field, how many of them filled it."""

    mismatched: bool
    items: int = 0
    filled: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DriftRule:
    """How a store steps a drift test: its ``threshold``, and the drift mark
    (``frontier/drift_marks.py``) it writes into the domain's strategy slot when it fires."""

    mark: str
    threshold: float = THRESHOLD


@dataclass(slots=True)
class DriftTest:
    """A one-sided Bernoulli CUSUM on mismatches against a baseline share it learns.

    The statistic climbs by ``log(p1/p0)`` on a mismatch and falls by
    ``log((1-p0)/(1-p1))`` on a page that met its expectations, never below 0; it fires at
    ``threshold``. The baseline ``p0`` is the Laplace-smoothed mismatch share of the pages
    that came while the statistic was at rest (0), within ``BASELINE_FLOOR`` and
    ``BASELINE_CAP``: a break lifts the statistic at once, so the break does not teach the
    baseline.
    """

    threshold: float = THRESHOLD
    drift_share: float = DRIFT_SHARE
    pages: int = 0
    mismatches: int = 0
    rest_pages: int = 0
    rest_mismatches: int = 0
    statistic: float = 0.0
    fired_at: int | None = None
    """The page (1-based) at which the test fired; None while it has not."""
    rest_items: int = 0
    rest_filled: dict[str, int] = field(default_factory=dict)
    run_pages: int = 0
    run_items: int = 0
    run_filled: dict[str, int] = field(default_factory=dict)
    """Items and filled fields of the pages that left the statistic at 0 (the fill rates'
    baseline), and of the current run: the pages since the statistic was last 0."""

    @property
    def baseline(self) -> float:
        share = (self.rest_mismatches + 1) / (self.rest_pages + 2)
        return min(max(share, BASELINE_FLOOR), BASELINE_CAP)

    @property
    def just_fired(self) -> bool:
        """Whether the last page taken made the test fire."""
        return self.fired_at is not None and self.fired_at == self.pages

    def observe(self, mismatched: bool) -> bool:
        """Take one page; True when this page makes the test fire (once)."""
        return self.take(DriftPage(mismatched))

    def take(self, page: DriftPage) -> bool:
        """Take one page with its items; True when this page makes the test fire (once)."""
        self.pages += 1
        self.mismatches += page.mismatched
        p0, p1 = self.baseline, self.drift_share
        if self.statistic == 0.0:
            self.rest_pages += 1
            self.rest_mismatches += page.mismatched
        step = math.log(p1 / p0) if page.mismatched else math.log((1 - p1) / (1 - p0))
        self.statistic = max(0.0, self.statistic + step)
        if self.statistic == 0.0:
            self.rest_items += page.items
            _add(self.rest_filled, page.filled)
            self.run_pages, self.run_items, self.run_filled = 0, 0, {}
        else:
            self.run_pages += 1
            self.run_items += page.items
            _add(self.run_filled, page.filled)
        if self.fired_at is None and self.statistic >= self.threshold:
            self.fired_at = self.pages
            return True
        return False

    def restart(self) -> None:
        """Start the test over after a resume (its mark cleared); the baseline stays."""
        self.statistic = 0.0
        self.fired_at = None

    def copy(self) -> DriftTest:
        return replace(self, rest_filled=dict(self.rest_filled), run_filled=dict(self.run_filled))

    def field_diff(self) -> dict[str, tuple[float | None, float | None]]:
        """Expected field -> (fill rate at rest, fill rate in the current run); None: no
        items to rate."""
        names = sorted(self.rest_filled.keys() | self.run_filled.keys())
        return {
            name: (
                _share(self.rest_filled.get(name, 0), self.rest_items),
                _share(self.run_filled.get(name, 0), self.run_items),
            )
            for name in names
        }

    def to_json(self) -> dict[str, Any]:
        """The stored form (the threshold is the crawl's setting, not stored). The statistic
        is a string (``%.17g``) so that every store keeps it exactly."""
        return {
            "pages": self.pages,
            "mismatches": self.mismatches,
            "rest_pages": self.rest_pages,
            "rest_mismatches": self.rest_mismatches,
            "statistic": f"{self.statistic:.17g}",
            "fired_at": self.fired_at if self.fired_at is not None else -1,
            "rest_items": self.rest_items,
            "rest_filled": dict(self.rest_filled),
            "run_pages": self.run_pages,
            "run_items": self.run_items,
            "run_filled": dict(self.run_filled),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], threshold: float = THRESHOLD) -> DriftTest:
        fired_at = int(raw.get("fired_at", -1))
        return cls(
            threshold=threshold,
            pages=int(raw.get("pages", 0)),
            mismatches=int(raw.get("mismatches", 0)),
            rest_pages=int(raw.get("rest_pages", 0)),
            rest_mismatches=int(raw.get("rest_mismatches", 0)),
            statistic=float(raw.get("statistic", 0.0)),
            fired_at=None if fired_at < 0 else fired_at,
            rest_items=int(raw.get("rest_items", 0)),
            rest_filled=_counts(raw.get("rest_filled")),
            run_pages=int(raw.get("run_pages", 0)),
            run_items=int(raw.get("run_items", 0)),
            run_filled=_counts(raw.get("run_filled")),
        )


def observe_in(
    tests: dict[str, DriftTest],
    strategy: dict[str, str],
    parser: str,
    page: DriftPage,
    rule: DriftRule,
) -> DriftTest:
    """Step ``parser``'s test among a domain's ``tests`` (created at its first page) and
    write ``rule.mark`` into the domain's ``strategy`` when it fires; a copy of the test
    after. A test that fired and whose mark is gone since (``resume``) starts over first.
    The embedded stores' ``observe_drift``."""
    test = tests.get(parser)
    if test is None:
        test = tests[parser] = DriftTest()
    test.threshold = rule.threshold
    if test.fired_at is not None and mark_key(parser) not in strategy:
        test.restart()
    if test.take(page):
        strategy[mark_key(parser)] = rule.mark
    return test.copy()


def _add(into: dict[str, int], counts: Mapping[str, int]) -> None:
    for name, count in counts.items():
        into[name] = into.get(name, 0) + count


def _counts(raw: object) -> dict[str, int]:
    """A field -> count map as stored (an empty one may come back from Lua as a list)."""
    return {str(k): int(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None
