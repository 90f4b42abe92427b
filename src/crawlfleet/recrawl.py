"""When a known URL is due again: recrawl rules of the config and the adaptive interval.

A rule (``[[crawl.recrawl]]``) matches a page by URL regex (``pattern``) or by the type of
an item it yielded (``item_type``); the first matching rule wins, else the crawl's own
``recrawl_after`` / ``recrawl_adaptive`` / ``recrawl_min`` / ``recrawl_max``. A fixed rule
revisits ``after`` seconds after each visit. An adaptive one halves the page's interval
when the visit found it changed and doubles it when not, within ``[min, max]``, starting at
``after``: a page that changes at every visit converges to ``min``, a static one to
``max``. A page without any rule (no ``recrawl_after`` anywhere) is never due again.

Durations are seconds or text with a unit: ``90s``, ``15m``, ``6h``, ``3d``, ``1w``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from crawlfleet.patterns import compile_pattern

NEVER = math.inf
"""The next visit of a page no rule revisits."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw]?)")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration_s(value: Any) -> float:
    """Seconds of ``6h``-style text or a number; ``ValueError`` for anything else."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text such as 90s, 6h, 3d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        found = _DURATION.fullmatch(str(value).strip().lower())
        if found is None:
            raise ValueError("a duration is a number of seconds or text such as 90s, 6h, 3d")
        seconds = float(found.group(1)) * _UNIT_S[found.group(2)]
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError("a duration must be finite and >= 0")
    return seconds


Duration = Annotated[float, BeforeValidator(duration_s)]


class RecrawlRule(BaseModel):
    """One ``[[crawl.recrawl]]`` entry: which pages, and when they are due again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str | None = Field(default=None, description="URL regex (RE2 syntax)")
    item_type: str | None = Field(default=None, description="pages yielding this item type")
    after: Duration = Field(description="interval after a visit (adaptive: the first one)")
    adaptive: bool = False
    min: Duration | None = None
    max: Duration | None = None
    priority: int = Field(default=0, ge=-65535, le=65535, description="queue priority of a revisit")

    @model_validator(mode="after")
    def _one_selector(self) -> RecrawlRule:
        if (self.pattern is None) == (self.item_type is None):
            raise ValueError("a recrawl rule names a pattern or an item_type (one of them)")
        low, high = self.bounds
        if low > high:
            raise ValueError("min must be <= max")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        return (self.min if self.min is not None else self.after,
                self.max if self.max is not None else self.after)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Due:
    """A page's next visit: ``interval_s`` after this one (``NEVER``: not revisited)."""

    interval_s: float
    priority: int = 0


class RecrawlPolicy:
    """Picks a page's rule and its next interval; see the module docstring."""

    def __init__(self, rules: Sequence[RecrawlRule], default: RecrawlRule | None) -> None:
        self._rules = tuple(rules)
        self._patterns = [
            compile_pattern(r.pattern, "recrawl.pattern") if r.pattern else None
            for r in self._rules
        ]
        self._default = default

    @property
    def enabled(self) -> bool:
        """Whether any page can ever be due again."""
        return bool(self._rules) or self._default is not None

    def rule_for(self, url: str, item_types: Collection[str]) -> RecrawlRule | None:
        for rule, pattern in zip(self._rules, self._patterns, strict=True):
            if pattern is not None and pattern.search(url):
                return rule
            if rule.item_type is not None and rule.item_type in item_types:
                return rule
        return self._default

    def next_due(
        self,
        url: str,
        item_types: Collection[str],
        *,
        previous_s: float | None,
        changed: bool,
        after_s: float | None = None,
        priority: int = 0,
    ) -> Due:
        """The interval after this visit.

        ``previous_s``: the interval that led to this visit (None: a first visit);
        ``changed``: whether the visit found new content; ``after_s`` and ``priority``: what
        the page's parser asked for (``models.Revisit``), which win over the rule's.
        """
        rule = self.rule_for(url, item_types)
        if after_s is not None:
            return Due(after_s, max(priority, rule.priority if rule else 0))
        if rule is None:
            return Due(NEVER, priority)
        return Due(adapt(rule, previous_s, changed), max(priority, rule.priority))


def adapt(rule: RecrawlRule, previous_s: float | None, changed: bool) -> float:
    """The rule's next interval: fixed, or halved on a change / doubled without, bounded."""
    if not rule.adaptive or previous_s is None or not math.isfinite(previous_s):
        return rule.after
    low, high = rule.bounds
    moved = previous_s / 2 if changed else max(previous_s, 1e-3) * 2
    return min(high, max(low, moved))
