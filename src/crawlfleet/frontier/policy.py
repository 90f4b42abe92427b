"""A domain's policy record and the pure rules that change it (block window, rest, Retry-After).

The memory and SQLite stores apply these functions to a ``PolicyRecord``; the Redis store
re-implements them in Lua (``frontier/redis/lua``). The exact rules, for a lease end of
``report`` at ``at = report.attempt.at`` with rules ``r = default.blocks``:

1. ``judge`` (the block window), by ``report.signal``:

   - ``BLOCK``: append ``"b"`` to ``window``, keep its last ``r.window`` characters,
     ``streak = 0``. Then with ``n = len(window)`` and ``b`` its count of ``"b"``: if
     ``n >= r.min_samples`` and ``b / n >= r.threshold`` and ``level < r.max_level``:
     ``level += 1``, ``window = ""``, ``cooldown_until = at + r.cooldown_s * 2 ** (level - 1)``
     (new level), ``block_reason = report.reason``, and the change is
     ``PolicyChange(domain, level, "escalated",
     f"{b} of {n} recent responses blocked; last: {report.reason}", cooldown_until)``, and
     the strategy slot climbs the ladder's rung of the new level (``ladder.climbed``).
   - ``SUCCESS``: append ``"o"``, keep the last ``r.window``, ``streak += 1``; if
     ``level > 0`` and ``streak >= r.recover_after``: ``level -= 1``, ``streak = 0``, change
     ``PolicyChange(domain, level, "recovered", f"{r.recover_after} clean responses in a
     row", 0.0)``, and the strategy slot comes down a rung (``ladder.descended``).
   - ``NONE``: nothing.

2. ``rest_until`` (after ``judge``, so with the new level): the domain's new ``ready_at`` is
   the max of its ``ready_at``, ``at + effective_delay_s`` unless the outcome is ``skipped``,
   ``cooldown_until`` if it escalated just now, and ``report.block_until`` when > 0; that
   last one also sets ``retry_after_until = max(retry_after_until, block_until)`` and
   ``block_reason = report.reason``.

``effective_delay_s = base_delay_s * 2 ** level``, the base being the default's ``delay_s``
while the record has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from crawlfleet.frontier import ladder
from crawlfleet.frontier.store_types import DelaySource, DomainPolicy, PolicyChange, Report, Signal
from crawlfleet.records import Outcome

BLOCKED, CLEAN = "b", "o"


@dataclass(slots=True)
class PolicyRecord:
    """One domain's policy; None fields take the crawl default."""

    base_delay_s: float | None = None
    delay_source: DelaySource = DelaySource.CONFIG
    max_in_flight: int | None = None
    level: int = 0
    window: str = ""
    """The last judged outcomes, oldest first: ``b`` a block, ``o`` a clean success."""
    streak: int = 0
    cooldown_until: float = 0.0
    block_reason: str = ""
    retry_after_until: float = 0.0
    strategy: dict[str, str] = field(default_factory=dict)


def base_delay_s(record: PolicyRecord, default: DomainPolicy) -> float:
    return default.delay_s if record.base_delay_s is None else record.base_delay_s


def effective_delay_s(record: PolicyRecord, default: DomainPolicy) -> float:
    """The base delay doubled for each block level."""
    return base_delay_s(record, default) * float(2**record.level)


def max_in_flight(record: PolicyRecord, default: DomainPolicy) -> int:
    return default.max_in_flight if record.max_in_flight is None else record.max_in_flight


def set_delay(record: PolicyRecord, delay_s: float, source: DelaySource) -> bool:
    """Set the base delay unless ``source`` is robots and an override is in place; changed?"""
    if source.from_robots and record.delay_source is DelaySource.OVERRIDE:
        return False
    record.base_delay_s = delay_s
    record.delay_source = source
    return True


def judge(
    record: PolicyRecord, domain: str, report: Report, default: DomainPolicy
) -> PolicyChange | None:
    """Move the block window by one response; the level change it caused, if any."""
    rules = default.blocks
    if report.signal is Signal.BLOCK:
        record.window = (record.window + BLOCKED)[-rules.window :]
        record.streak = 0
        n = len(record.window)
        blocks = record.window.count(BLOCKED)
        if (
            n >= rules.min_samples
            and blocks / n >= rules.threshold
            and record.level < rules.max_level
        ):
            record.level += 1
            record.window = ""
            record.cooldown_until = report.attempt.at + rules.cooldown_s * 2 ** (record.level - 1)
            record.block_reason = report.reason
            reason = f"{blocks} of {n} recent responses blocked; last: {report.reason}"
            change = PolicyChange(domain, record.level, "escalated", reason, record.cooldown_until)
            return _move_strategy(record, change, rules.ladder)
    elif report.signal is Signal.SUCCESS:
        record.window = (record.window + CLEAN)[-rules.window :]
        record.streak += 1
        if record.level > 0 and record.streak >= rules.recover_after:
            record.level -= 1
            record.streak = 0
            reason = f"{rules.recover_after} clean responses in a row"
            change = PolicyChange(domain, record.level, "recovered", reason, 0.0)
            return _move_strategy(record, change, rules.ladder)
    return None


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
