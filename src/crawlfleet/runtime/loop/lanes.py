"""The claim loop's lanes: which fetcher kinds are claimed together, and how many of their
steps may be in flight.

The kinds without a limit of their own share one lane, first; each kind in ``kind_limits``
has a lane of its own (the browser lane: its pool's pages), so slow browser pages never hold
the HTTP lane's slots, nor wait for a page with a lease running.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(slots=True)
class Lane:
    """Kinds claimed together, at most ``cap`` of their steps in flight."""

    kinds: frozenset[str]
    cap: int
    running: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def free(self) -> int:
        return self.cap - len(self.running)


def lanes_for(
    kinds: frozenset[str], concurrency: int, kind_limits: Mapping[str, int] | None
) -> list[Lane]:
    """The lanes of a loop serving ``kinds``: the shared lane (``concurrency`` steps) first,
    then one per limited kind in name order; limits of kinds not served are ignored.

    ``ValueError`` when a limit is below 1.
    """
    limits = {kind: cap for kind, cap in (kind_limits or {}).items() if kind in kinds}
    if any(cap < 1 for cap in limits.values()):
        raise ValueError(f"kind limits must be >= 1, got {limits}")
    shared = kinds - frozenset(limits)
    lanes = [Lane(frozenset({kind}), cap) for kind, cap in sorted(limits.items())]
    if shared:
        lanes.insert(0, Lane(shared, concurrency))
    return lanes
