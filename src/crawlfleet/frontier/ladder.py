"""The strategy ladder: what each block level changes in a domain's fetch strategy.

A domain's block level (``policy.judge``) climbs one rung per escalation and comes down one
per recovery. Every level doubles the delay (``policy.effective_delay_s``); the rung of level
``L`` says what else changes: ``rungs[L - 1]``, or ``slow`` past the last rung. The rungs, in
the default order of the ``ladder`` setting:

- ``slow``: nothing but the delay;
- ``session``: ``session_epoch`` grows by one (every session of the domain is retired);
- ``tier``: ``tier`` grows by one, at most to the number of ``tier`` rungs (the next proxy
  tier); coming down past it lowers ``tier`` by one (never below 0);
- ``impersonate``, ``browser``: ``fetcher`` becomes the rung; coming down past it, ``fetcher``
  becomes the highest fetcher rung still below the level, or is removed.

``rung`` holds the name of the level's rung (removed at level 0). Other keys of the slot are
kept as they are. With no rungs (``BlockRules.ladder == ()``) the slot is never touched.
The Redis store repeats these rules in ``frontier/redis/lua/finish.lua``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from crawlfleet.errors import ConfigError

SLOW, SESSION, TIER, IMPERSONATE, BROWSER = "slow", "session", "tier", "impersonate", "browser"
RUNGS = (SLOW, SESSION, TIER, IMPERSONATE, BROWSER)
"""Every rung name, lowest first: the default ``ladder``."""
FETCHER_RUNGS = (IMPERSONATE, BROWSER)

RUNG_KEY, SESSION_KEY, TIER_KEY, FETCHER_KEY = "rung", "session_epoch", "tier", "fetcher"
"""The strategy keys the ladder writes (the shared strategy contract)."""


def check_ladder(ladder: Sequence[str]) -> None:
    """``ConfigError`` (one line) for the first unknown rung."""
    for name in ladder:
        if name not in RUNGS:
            raise ConfigError(f"unknown rung {name!r} in ladder; choose from {', '.join(RUNGS)}")


def usable_rungs(
    ladder: Sequence[str], *, proxy_tiers: int, kinds: Collection[str], sessions: bool = True
) -> tuple[str, ...]:
    """The rungs of ``ladder`` this crawl can use, in order.

    The ``session`` rung needs crawl sessions (``sessions``: the crawl has ``[crawl.proxies]``);
    the ``n``-th ``tier`` rung needs ``n + 1`` proxy tiers (no proxies: no tier rung); a
    fetcher rung needs its fetcher kind among ``kinds`` (what this build serves).
    """
    check_ladder(ladder)
    kept: list[str] = []
    tiers = 0
    for name in ladder:
        if name == SESSION and not sessions:
            continue
        if name == TIER:
            if tiers + 1 >= proxy_tiers:
                continue
            tiers += 1
        if name in FETCHER_RUNGS and name not in kinds:
            continue
        kept.append(name)
    return tuple(kept)


def rung_of(rungs: Sequence[str], level: int) -> str:
    """The rung of ``level`` (>= 1): ``slow`` past the last rung."""
    return rungs[level - 1] if level <= len(rungs) else SLOW


def _number(strategy: Mapping[str, str], key: str) -> int:
    value = strategy.get(key, "0")
    return int(value) if value.isdecimal() else 0


def climbed(strategy: Mapping[str, str], rungs: Sequence[str], level: int) -> dict[str, str]:
    """The strategy after the level rose to ``level``: a new mapping."""
    changed = dict(strategy)
    name = rung_of(rungs, level)
    if name == SESSION:
        changed[SESSION_KEY] = str(_number(strategy, SESSION_KEY) + 1)
    elif name == TIER:
        changed[TIER_KEY] = str(min(_number(strategy, TIER_KEY) + 1, rungs.count(TIER)))
    elif name in FETCHER_RUNGS:
        changed[FETCHER_KEY] = name
    changed[RUNG_KEY] = name
    return changed


def descended(strategy: Mapping[str, str], rungs: Sequence[str], level: int) -> dict[str, str]:
    """The strategy after the level fell to ``level`` (from ``level + 1``): a new mapping."""
    changed = dict(strategy)
    left = rung_of(rungs, level + 1)
    if left == TIER:
        changed[TIER_KEY] = str(max(_number(strategy, TIER_KEY) - 1, 0))
    elif left in FETCHER_RUNGS:
        below = [name for name in rungs[:level] if name in FETCHER_RUNGS]
        if below:
            changed[FETCHER_KEY] = below[-1]
        else:
            changed.pop(FETCHER_KEY, None)
    if level > 0:
        changed[RUNG_KEY] = rung_of(rungs, level)
    else:
        changed.pop(RUNG_KEY, None)
    return changed
