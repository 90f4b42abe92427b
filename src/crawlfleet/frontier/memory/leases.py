"""The in-memory store's leases: the current ones by token, and when each expires.

Expiries sit in a heap by (expires_at, token). A renewal pushes the lease's new expiry and
leaves the old entry, as an ended lease leaves its own: ``pop_expired`` skips both.
"""

from __future__ import annotations

import heapq


class Leases:
    """Current lease tokens, each with its fingerprint and expiry."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, float]] = {}
        self._expiries: list[tuple[float, str]] = []

    def grant(self, token: str, fingerprint: str, expires_at: float) -> None:
        self._held[token] = (fingerprint, expires_at)
        heapq.heappush(self._expiries, (expires_at, token))

    def end(self, token: str) -> str | None:
        """End a current lease: its fingerprint; None when the token is not current."""
        held = self._held.pop(token, None)
        return None if held is None else held[0]

    def renew(self, token: str, expires_at: float) -> bool:
        """Extend a current lease to ``expires_at``, never shortened; False if not current."""
        held = self._held.get(token)
        if held is None:
            return False
        fingerprint, current = held
        if expires_at > current:
            self._held[token] = (fingerprint, expires_at)
            heapq.heappush(self._expiries, (expires_at, token))
        return True

    def pop_expired(self, now: float) -> tuple[str, float] | None:
        """End the lease that expired first, strictly before ``now``: its fingerprint and
        expiry; None when no current lease has expired."""
        while self._expiries and self._expiries[0][0] < now:
            expires_at, token = heapq.heappop(self._expiries)
            held = self._held.get(token)
            if held is None or held[1] > expires_at:
                continue  # ended, or renewed: its later expiry is in the heap too
            del self._held[token]
            return held[0], expires_at
        return None
