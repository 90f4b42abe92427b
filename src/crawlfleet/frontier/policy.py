"""A domain's policy record and the pure rules that change it (block window, rest, Retry-After).

The memory and SQLite stores apply these functions to a ``PolicyRecord``; the Redis store
re-implements them in Lua (``frontier/redis/lua``). The exact rules, for a lease end of
``report`` at ``at = report.attempt.at`` with rules ``r = default.blocks``:

1. ``judge`` (the block window), by ``mark = window_mark(report)``: ``"o"`` for a
   ``SUCCESS``, ``"b"`` for a ``BLOCK``, for a ``REFUSED`` one of ``KIND_MARKS`` naming the
   kind of its URL (``url_kind``), ``""`` for ``NONE``. Nothing happens for ``""``, nor for
   the refusal of a retry (``refused_again``) while ``window`` holds an ``"o"``: a refused
   URL counts once while other URLs succeed, every time when none does.

   - ``"o"``: append it to ``window``, keep its last ``r.window`` characters, ``streak += 1``;
     if ``level > 0`` and ``streak >= r.recover_after``: ``level -= 1``, ``streak = 0``,
     change ``PolicyChange(domain, level, "recovered", f"{r.recover_after} clean responses
     in a row", 0.0)``, and the strategy slot comes down a rung (``ladder.descended``).
   - any other mark: append it, keep the last ``r.window``; ``streak = 0`` for ``"b"``. Then
     with ``n = len(window)``, ``b`` its count of ``"b"``, ``o`` of ``"o"``, ``x = n - o``
     (refused or blocked) and ``k`` the number of distinct refusal marks, if ``level <
     r.max_level`` and either ``n >= r.min_samples and b / n >= r.threshold`` (the block
     rule, tried first) or ``n >= r.window and (o == 0 or (x / n >= r.refusal_threshold and
     k >= r.refusal_kinds))`` (the refusal rule): ``level += 1``, ``window = ""``, ``streak
     = 0``, ``cooldown_until = at + r.cooldown_s * 2 ** (level - 1)`` (new level),
     ``block_reason = report.reason``, and the change is ``PolicyChange(domain, level,
     "escalated", escalation_reason(rule, count, n, k, report.reason), cooldown_until)``
     (``count``: ``b`` for the block rule, ``x`` for the refusal rule), and the strategy slot
     climbs the ladder's rung of the new level (``ladder.climbed``).

2. ``rest_until`` (after ``judge``, so with the new level): the domain's new ``ready_at`` is
   the max of its ``ready_at``, ``at + effective_delay_s`` unless the outcome is ``skipped``,
   ``cooldown_until`` if it escalated just now, and ``report.block_until`` when > 0; that
   last one also sets ``retry_after_until = max(retry_after_until, block_until)`` and
   ``block_reason = report.reason``.

``effective_delay_s = base_delay_s * 2 ** level``, the base being the default's ``delay_s``
while the record has none.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from crawlfleet.frontier import ladder
from crawlfleet.frontier.drift import DriftTest
from crawlfleet.frontier.store_types import (
    BlockRules,
    DelaySource,
    DomainPolicy,
    PolicyChange,
    Report,
    Signal,
)
from crawlfleet.records import Outcome

BLOCKED, CLEAN = "b", "o"
KIND_MARKS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
"""The marks of refused URLs in a block window, one per kind of URL (a hash of ``url_kind``):
two kinds may share a mark (1 chance in 32 for two kinds), which only makes a spread of
refusals look narrower, never wider."""
BLOCK_RULE, REFUSAL_RULE = "blocked", "refused"
_DIGITS = re.compile(r"[0-9]+")


@dataclass(slots=True)
class PolicyRecord:
    """One domain's policy; None fields take the crawl default."""

    base_delay_s: float | None = None
    delay_source: DelaySource = DelaySource.CONFIG
    max_in_flight: int | None = None
    level: int = 0
    window: str = ""
    """The last judged outcomes, oldest first: ``b`` a block, ``o`` a clean success, one of
    ``KIND_MARKS`` a refused URL of that kind."""
    streak: int = 0
    cooldown_until: float = 0.0
    block_reason: str = ""
    retry_after_until: float = 0.0
    strategy: dict[str, str] = field(default_factory=dict)
    drift: dict[str, DriftTest] = field(default_factory=dict)
    """Parser -> its drift test on the domain (``frontier/drift.py``)."""


def base_delay_s(record: PolicyRecord, default: DomainPolicy) -> float:
    return default.delay_s if record.base_delay_s is None else record.base_delay_s


def effective_delay_s(record: PolicyRecord, default: DomainPolicy) -> float:
    """The base delay doubled for each block level."""
    return base_delay_s(record, default) * float(2**record.level)


def delay_source(stored: DelaySource, default: DomainPolicy) -> DelaySource:
    """The source a view shows: a domain on the crawl-wide delay (``config``) shows the
    settings layer that gave it."""
    return default.delay_source if stored is DelaySource.CONFIG else stored


def max_in_flight(record: PolicyRecord, default: DomainPolicy) -> int:
    return default.max_in_flight if record.max_in_flight is None else record.max_in_flight


def set_delay(record: PolicyRecord, delay_s: float, source: DelaySource) -> bool:
    """Set the base delay unless ``source`` is robots and an override is in place; changed?

    ``config`` puts the domain back on the crawl-wide delay: ``delay_s`` is not kept, so a
    later run's own delay applies.
    """
    if source.from_robots and record.delay_source is DelaySource.OVERRIDE:
        return False
    record.base_delay_s = None if source is DelaySource.CONFIG else delay_s
    record.delay_source = source
    return True


def url_kind(url: str) -> str:
    """The kind of URL a refusal counts for: its path up to the last ``/``, digits as ``0``.

    ``/docs/api/x.html`` and ``/docs/api/y.html`` are one kind, ``/item/12/reviews`` and
    ``/item/7/reviews`` too; ``/news/1`` and ``/shop/1`` are two.
    """
    path = urlsplit(url).path
    return _DIGITS.sub("0", path[: path.rfind("/") + 1] or "/")


def window_mark(report: Report) -> str:
    """The character ``report`` adds to its domain's block window (``""``: none)."""
    signal = report.signal
    if signal is Signal.SUCCESS:
        return CLEAN
    if signal is Signal.BLOCK:
        return BLOCKED
    if signal is Signal.REFUSED:
        kind = url_kind(report.attempt.url).encode()
        return KIND_MARKS[zlib.crc32(kind) % len(KIND_MARKS)]
    return ""


def refused_again(report: Report) -> bool:
    """Whether ``report`` is the refusal of a retry: it counts only while no success is in
    the window (a refused URL counts once while its domain's other URLs succeed)."""
    return report.signal is Signal.REFUSED and report.attempt.retry > 0


def escalation_reason(rule: str, count: int, judged: int, kinds: int, last: str) -> str:
    """Why a domain escalated, as every store words it."""
    if rule == BLOCK_RULE:
        return f"{count} of {judged} recent responses blocked; last: {last}"
    spread = "1 kind" if kinds == 1 else f"{kinds} kinds"
    return (
        f"{count} of {judged} recent responses refused or blocked ({spread} of URL); last: {last}"
    )


def ban_rule(window: str, rules: BlockRules) -> tuple[str, int, int] | None:
    """The rule by which ``window`` shows a ban, its count and its kinds of refused URL."""
    judged = len(window)
    blocks = window.count(BLOCKED)
    if judged >= rules.min_samples and blocks / judged >= rules.threshold:
        return BLOCK_RULE, blocks, 0
    if judged < rules.window:
        return None
    refused = judged - window.count(CLEAN)
    kinds = len(set(window) - {BLOCKED, CLEAN})
    if refused == judged or (
        refused / judged >= rules.refusal_threshold and kinds >= rules.refusal_kinds
    ):
        return REFUSAL_RULE, refused, kinds
    return None


def judge(
    record: PolicyRecord, domain: str, report: Report, default: DomainPolicy
) -> PolicyChange | None:
    """Move the block window by one response; the level change it caused, if any."""
    rules = default.blocks
    mark = window_mark(report)
    if not mark or (refused_again(report) and CLEAN in record.window):
        return None
    record.window = (record.window + mark)[-rules.window :]
    if mark == CLEAN:
        record.streak += 1
        if record.level > 0 and record.streak >= rules.recover_after:
            record.level -= 1
            record.streak = 0
            reason = f"{rules.recover_after} clean responses in a row"
            change = PolicyChange(domain, record.level, "recovered", reason, 0.0)
            return _move_strategy(record, change, rules.ladder)
        return None
    if mark == BLOCKED:
        record.streak = 0
    found = ban_rule(record.window, rules) if record.level < rules.max_level else None
    if found is None:
        return None
    rule, count, kinds = found
    reason = escalation_reason(rule, count, len(record.window), kinds, report.reason)
    record.level += 1
    record.window = ""
    record.streak = 0
    record.cooldown_until = report.attempt.at + rules.cooldown_s * 2 ** (record.level - 1)
    record.block_reason = report.reason
    change = PolicyChange(domain, record.level, "escalated", reason, record.cooldown_until)
    return _move_strategy(record, change, rules.ladder)


def _move_strategy(
    record: PolicyRecord, change: PolicyChange, rungs: tuple[str, ...]
) -> PolicyChange:
    """Move the strategy slot with the level ``change`` moved to; the change, completed."""
    if not rungs:
        return change
    if change.change == "escalated":
        record.strategy = ladder.climbed(record.strategy, rungs, record.level)
    else:
        record.strategy = ladder.descended(record.strategy, rungs, record.level)
    rung = ladder.rung_of(rungs, record.level) if record.level > 0 else ""
    return replace(change, rung=rung, strategy=dict(record.strategy))


def rest_until(
    record: PolicyRecord,
    ready_at: float,
    report: Report,
    change: PolicyChange | None,
    default: DomainPolicy,
) -> float:
    """The domain's ready time after a lease end that ``judge`` has already applied."""
    if report.attempt.outcome is not Outcome.SKIPPED:
        ready_at = max(ready_at, report.attempt.at + effective_delay_s(record, default))
    if change is not None and change.change == "escalated":
        ready_at = max(ready_at, change.until)
    if report.block_until > 0:
        ready_at = max(ready_at, report.block_until)
        record.retry_after_until = max(record.retry_after_until, report.block_until)
        record.block_reason = report.reason
    return ready_at


def end_lease(
    record: PolicyRecord, domain: str, ready_at: float, report: Report, default: DomainPolicy
) -> tuple[float, PolicyChange | None]:
    """Apply a lease end's report to ``record``: the new ready time and any level change."""
    change = judge(record, domain, report, default)
    return rest_until(record, ready_at, report, change, default), change
