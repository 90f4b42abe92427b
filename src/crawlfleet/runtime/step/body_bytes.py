"""The page bodies the crawl steps of a process hold, and how many more steps fit (0048).

A step holds its body from the end of its fetch until the step ends (parsed, items stored,
links queued), and a body of 10 MB is also its parse tree, several times larger, while it
is parsed. Bounding the steps in flight by number alone lets one site of large pages
multiply its page size by the concurrency. So the claim loop asks ``room()`` before it
claims: the steps that may start are those whose bodies fit in ``budget_bytes`` besides
the bodies held, a step still fetching counted at the typical body size of the steps
before it (a moving average, starting at an eighth of the budget, so a crawl's first steps
start a few at a time until their sizes are known). With nothing in flight one step may
always start, whatever its size: the crawl never waits on itself.

This is a bound on what the claim loop starts, not on what a fetch may read: a step
claimed while the typical body was small may still bring a large one (``max_body_bytes``
caps each).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

DEFAULT_BUDGET_BYTES = 64 * 1024 * 1024  # settings.max_body_bytes_in_flight
# The weight of the last body in the typical size: after 8 bodies of a new size, ~2/3 of
# the way there.
_SMOOTHING = 1 / 8
_FIRST_GUESS_SHARE = 1 / 8


class StepBody:
    """One step's share: nothing until ``fetched`` tells its body's size."""

    __slots__ = ("_owner", "size_bytes")

    def __init__(self, owner: BodyBytes) -> None:
        self._owner = owner
        self.size_bytes: int | None = None

    def fetched(self, size_bytes: int) -> None:
        """The step's body arrived; it is held until the step ends. Once a step."""
        if self.size_bytes is None:
            self.size_bytes = size_bytes
            self._owner._fetched(size_bytes)


class BodyBytes:
    """Bodies held by the steps in flight of one process, against ``budget_bytes``."""

    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        if budget_bytes < 1:
            raise ValueError(f"budget_bytes must be >= 1, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self.held_bytes = 0
        """Bodies fetched whose steps have not ended."""
        self.fetching = 0
        """Steps started whose bodies have not arrived (or never will: a failed fetch)."""
        self.typical_bytes = budget_bytes * _FIRST_GUESS_SHARE

    def room(self) -> int:
        """How many more steps may start now: at least 1 when no step is in flight."""
        if self.fetching == 0 and self.held_bytes == 0:
            return max(1, int(self.budget_bytes // self.typical_bytes))
        typical = max(self.typical_bytes, 1.0)
        free = self.budget_bytes - self.held_bytes - self.fetching * typical
        return max(0, int(free // typical))

    @contextmanager
    def step(self) -> Iterator[StepBody]:
        """A step from its start to its end; its body is let go at the end."""
        self.fetching += 1
        body = StepBody(self)
        try:
            yield body
        finally:
            if body.size_bytes is None:
                self.fetching -= 1
            else:
                self.held_bytes -= body.size_bytes

    def _fetched(self, size_bytes: int) -> None:
        self.fetching -= 1
        self.held_bytes += size_bytes
        self.typical_bytes += (size_bytes - self.typical_bytes) * _SMOOTHING
