"""What a response means for the request and its domain: status classes, backoff, blocks.

The crawl loop uses these in this order for each ``FetchResult``::

    verdict = detector.observe(domain, result)     # slows a domain that starts blocking us
    kind = classify(result)
    if kind is StatusClass.RETRY_AFTER:            # block the domain for the larger of
        delay_s = parse_retry_after(result.headers.get("retry-after"), now)
        ...                                        # delay_s and verdict.cooldown_s
    elif verdict.blocked: ...                      # retry later, domain cooled down
    elif kind is StatusClass.TRANSIENT: ...        # retry after backoff_s(attempt, ...)

All of it is deterministic given the clock and the random generator passed in.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from enum import Enum

from crawlfleet.clock import Clock
from crawlfleet.models import FetchResult

DAY_S = 86_400.0
_SECONDS = re.compile(r"-?\d+(\.\d+)?")
_TRANSIENT_4XX = frozenset({408, 425, 429})


def backoff_s(attempt: int, *, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(max_s, base_s * 2**attempt)].

    ``attempt`` counts earlier failures (0 for the first retry).
    """
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    # 2.0**1024 overflows a float; past 2**62 the cap has long been reached anyway.
    ceiling_s = min(max_s, base_s * 2.0 ** min(attempt, 62))
    return rng.uniform(0.0, max(0.0, ceiling_s))


def parse_retry_after(value: str | None, now: float, *, max_s: float = DAY_S) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP-date).

    A negative delay or a date in the past gives 0, a delay beyond ``max_s`` gives ``max_s``;
    a missing or unreadable value gives None. ``now`` is epoch seconds.
    """
    if value is None:
        return None
    text = value.strip()
    if _SECONDS.fullmatch(text):
        delay_s = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        delay_s = when.timestamp() - now
    if not math.isfinite(delay_s):
        return None
    return min(max(delay_s, 0.0), max_s)


def retry_after_block(
    status: int, value: str | None, now: float, *, max_s: float
) -> tuple[float, str]:
    """How long a 429/503 parks its domain, and the reason to show for it.

    The header's delay, capped at ``max_s`` (setting ``max_retry_after_s``); a capped delay
    says so in the reason, so a server asking for a week is visible, not silently shortened.
    """
    asked_s = parse_retry_after(value, now, max_s=math.inf) or 0.0
    if asked_s <= max_s:
        return asked_s, f"HTTP {status} Retry-After"
    return max_s, (
        f"HTTP {status} Retry-After {asked_s:.0f} s is over max_retry_after_s "
        f"({max_s:.0f} s): domain parked for {max_s:.0f} s"
    )


class StatusClass(Enum):
    """What the crawl loop should do with a response, judged by its status alone."""

    OK = "ok"
    """Parse it (2xx, or a 3xx without a Location to follow)."""
    REDIRECT = "redirect"
    """A 3xx the fetcher did not follow: its Location is a new link; the request is done."""
    FINAL = "final"
    """Done and recorded, never retried (404, 410 and the other 4xx)."""
    TRANSIENT = "transient"
    """Retry the request after a backoff (408, 425, 429, 5xx, odd statuses)."""
    RETRY_AFTER = "retry_after"
    """429/503 with a readable Retry-After: the whole domain waits, then the request is retried."""


def classify(result: FetchResult) -> StatusClass:
    """The class of a response's status; see ``StatusClass``."""
    status = result.status
    if 200 <= status < 300:
        return StatusClass.OK
    if 300 <= status < 400:
        return StatusClass.REDIRECT if result.headers.get("location") else StatusClass.OK
    if status in (429, 503) and parse_retry_after(result.headers.get("retry-after"), 0.0):
        return StatusClass.RETRY_AFTER
    if 400 <= status < 500 and status not in _TRANSIENT_4XX:
        return StatusClass.FINAL
    return StatusClass.TRANSIENT


DEFAULT_BLOCK_MARKERS = (
    "captcha",
    "cf-challenge",
    "cf-chl-",
    "access denied",
    "unusual traffic",
    "are you a robot",
)


@dataclass(frozen=True, slots=True)
class BlockVerdict:
    """What one response says about being blocked by its domain.

    ``blocked``: the site refuses us: retry the request later, do not parse.
    ``delay_multiplier``: multiply the domain's delay by this (1.0 when all is well).
    ``cooldown_s``: when blocked, how long the domain should rest before the next request.
    ``changed``: the multiplier differs from the one before this response.
    """

    blocked: bool
    reason: str | None
    delay_multiplier: float
    cooldown_s: float
    changed: bool


class _Score:
    __slots__ = ("strikes", "successes", "updated_at")

    def __init__(self, now: float) -> None:
        self.strikes = 0
        self.successes = 0
        self.updated_at = now


class BlockDetector:
    """A per-domain block score: strikes from 403, 429 and ban pages slow the domain down.

    Each strike doubles the domain's delay multiplier, up to ``2**max_strikes``. Every
    ``successes_per_step`` consecutive 2xx responses without a marker, and every ``decay_s``
    without a strike, take one strike away. Ban markers (lower-case substrings) are looked for
    only in HTML bodies of 200, 403 and 429 responses no larger than ``max_marker_bytes``:
    ban and CAPTCHA pages are small, and this keeps the check cheap. Only domains with strikes
    are remembered.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        markers: Sequence[str] = DEFAULT_BLOCK_MARKERS,
        max_strikes: int = 4,
        successes_per_step: int = 3,
        decay_s: float = 600.0,
        cooldown_base_s: float = 60.0,
        max_marker_bytes: int = 32 * 1024,
    ) -> None:
        if max_strikes < 0 or successes_per_step < 1 or decay_s <= 0:
            raise ValueError("need max_strikes >= 0, successes_per_step >= 1, decay_s > 0")
        self._clock = clock
        self._markers = tuple(m.lower().encode("utf-8") for m in markers if m)
        self._max_strikes = max_strikes
        self._successes_per_step = successes_per_step
        self._decay_s = decay_s
        self._cooldown_base_s = cooldown_base_s
        self._max_marker_bytes = max_marker_bytes
        self._scores: dict[str, _Score] = {}

    def multiplier(self, domain: str) -> float:
        """The domain's current delay multiplier (1.0 for a domain with no strikes)."""
        return float(2 ** self._strikes(domain, self._clock.now()))

    def observe(self, domain: str, result: FetchResult) -> BlockVerdict:
        """Count one response toward the domain's score; the verdict for it."""
        now = self._clock.now()
        before = self._strikes(domain, now)
        reason = self._block_reason(result)
        if reason is not None:
            score = self._scores.setdefault(domain, _Score(now))
            score.strikes = min(score.strikes + 1, self._max_strikes)
            score.successes = 0
            score.updated_at = now
            multiplier = float(2**score.strikes)
            cooldown_s = self._cooldown_base_s * multiplier
            return BlockVerdict(True, reason, multiplier, cooldown_s, score.strikes != before)
        current = self._scores.get(domain)
        if current is not None and 200 <= result.status < 300:
            current.successes += 1
            if current.successes >= self._successes_per_step:
                current.strikes -= 1
                current.successes = 0
                current.updated_at = now
        after = self._strikes(domain, now)
        return BlockVerdict(False, None, float(2**after), 0.0, after != before)

    def _block_reason(self, result: FetchResult) -> str | None:
        status = result.status
        if status not in (200, 403, 429):
            return None
        body = result.body
        if self._markers and len(body) <= self._max_marker_bytes and result.is_html:
            lowered = body.lower()
            for marker in self._markers:
                if marker in lowered:
                    return f"ban marker {marker.decode('utf-8')!r} in a {status} page"
        if status == 403:
            return "403 forbidden"
        if status == 429:
            return "429 too many requests"
        return None

    def _strikes(self, domain: str, now: float) -> int:
        """The domain's strikes after time decay; a domain back at 0 is forgotten."""
        score = self._scores.get(domain)
        if score is None:
            return 0
        steps = int((now - score.updated_at) // self._decay_s)
        if steps > 0:
            score.strikes -= steps
            score.updated_at += steps * self._decay_s
        if score.strikes <= 0:
            del self._scores[domain]
            return 0
        return score.strikes
