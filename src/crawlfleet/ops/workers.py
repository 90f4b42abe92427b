"""Pages per second of each worker, from successive readings of its pages counter."""

from __future__ import annotations

from collections import deque

RATE_WINDOW_S = 10.0


class WorkerRates:
    """Keeps each worker's ``(at, pages)`` readings over ``window_s`` and derives its rate.

    ``at`` is the reading's own time (a heartbeat's ``seen_at``, in the worker's clock), so
    reading the same heartbeat twice adds nothing.
    """

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self._window_s = window_s
        self._points: dict[str, deque[tuple[float, int]]] = {}

    def observe(self, name: str, at: float, pages: int) -> float | None:
        """The worker's pages/s over the window; None until two readings exist."""
        points = self._points.setdefault(name, deque())
        if not points or at > points[-1][0]:
            points.append((at, pages))
        while len(points) > 2 and points[1][0] <= at - self._window_s:
            points.popleft()
        (first_at, first_pages), (last_at, last_pages) = points[0], points[-1]
        if last_at <= first_at:
            return None
        return max(0.0, (last_pages - first_pages) / (last_at - first_at))

    def forget_except(self, names: set[str]) -> None:
        """Drop the readings of workers no longer listed."""
        for name in set(self._points) - names:
            del self._points[name]
