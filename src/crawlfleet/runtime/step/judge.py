"""What a response means for the request and its domain: status classes, Retry-After, blocks.

The crawl step asks two questions of each ``FetchResult``: ``classify`` (what to do with the
request: parse, retry, follow, give up) and ``judge`` (what it says about the domain: a
block, a refusal of this URL, a clean success, or neither). The judge's signal goes to the
store with the lease's end, and the store's block window decides whether the whole domain
slows down; nothing here keeps state. The fetch chain asks the same questions
(``runtime/fetching/``: a crawl session retired on a block, the HTTP cache keeping no page
the step would fetch again), and so does ``reparse`` (only a page the step would parse).
How long a retried request waits is the frontier's (``frontier/backoff.py``).

Pure functions: the time, where one is needed, is passed in (``now``, epoch seconds).
"""

from __future__ import annotations

import math
import re
from email.utils import parsedate_to_datetime
from enum import Enum

import re2

from crawlfleet.frontier.store_types import Signal
from crawlfleet.models import FetchResult

DAY_S = 86_400.0
_SECONDS = re.compile(r"-?\d+(\.\d+)?")
_TRANSIENT_4XX = frozenset({408, 425, 429})


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


MAX_CHALLENGE_BYTES = 16 * 1024
"""A 200 page larger than this is never a challenge page: real ones are small."""
MAX_MARKER_SCAN_BYTES = 64 * 1024
"""How much of a 403/429/503 body is searched for a ban marker."""
MAX_CHALLENGE_LINKS = 4
"""A CAPTCHA widget on a page with more links than this is a form on a real page."""

BAN_MARKERS = (
    "captcha",
    "cf-chl",
    "cf-challenge",
    "challenge-platform",
    "access denied",
    "unusual traffic",
    "are you a robot",
    "verify you are human",
)
"""Lower-case phrases of ban and challenge pages, looked for only where ``judge`` says."""

_CHALLENGE_SCRIPTS = re.compile(
    rb"(?:cf-chl|challenge-platform|_cf_chl_opt|cf_chl_)",
)
"""Cloudflare's challenge machinery: found only on its challenge pages."""
_BOT_WALL = re.compile(
    rb"<(?:script|iframe)\b[^>]*\bsrc\s*=\s*[\"']?[^\"'>]*"
    rb"(captcha-delivery|px-captcha|perimeterx|arkoselabs|funcaptcha)"
)
"""Scripts of bot-wall vendors: a page with one and hardly any links is their wall."""
_CAPTCHA_WIDGET = re.compile(
    rb"<(?:script|iframe)\b[^>]*\bsrc\s*=\s*[\"']?[^\"'>]*(recaptcha|hcaptcha|turnstile)"
    rb"|<(?:div|form)\b[^>]*\b(?:class|id)\s*=\s*[\"']?[^\"'>]*"
    rb"(g-recaptcha|h-captcha|cf-turnstile|captcha-form)"
)
"""General CAPTCHA widgets, also found on sign-up and review forms of real pages."""
BOT_PHRASES = ("unusual traffic", "are you a robot", "verify you are human", "automated queries")
"""What a page says when its CAPTCHA widget is a wall rather than a form's guard."""
_TITLE = re.compile(rb"<title\b[^>]*>(.*?)</title", re.DOTALL | re.IGNORECASE)
_SCRIPT_WORDS = (b"chl", b"challenge-platform")
_WALL_WORDS = (b"captcha", b"perimeterx", b"arkoselabs")
_WIDGET_WORDS = (b"captcha", b"turnstile")
_ANY_WORD = re2.compile(
    b"(?i)" + b"|".join(dict.fromkeys((*_SCRIPT_WORDS, *_WALL_WORDS, *_WIDGET_WORDS)))
)
"""Any word one of the three patterns above needs, in any case: one linear scan of a page
(RE2: ~17 µs for 13 KB) instead of seven substring tests of its lowered copy (~44 µs)."""
_LINK = re.compile(rb"<a\b[^>]*\bhref")


REFUSALS = frozenset({401, 403, 451})
"""Statuses by which a site refuses one URL: evidence about that URL, not yet about the domain."""
RETRIED_REFUSALS = frozenset({403})
"""Refusals the crawl step retries as a URL failure (a 403 may lift); 401 and 451 are final."""


def judge(result: FetchResult) -> tuple[Signal, str]:
    """What a response says about being blocked by its domain, and why (empty for neither).

    429 is a block. A 401, 403 or 451 is a refusal of this URL (decision 0044: the store
    decides whether refusals add up to a ban; ``told_domain`` makes it a block when the URL
    succeeded before). A ban marker counts only on a page that looks like a challenge, which
    is a block: a 403/429/503 HTML page carrying one, or a small (``MAX_CHALLENGE_BYTES``)
    200 HTML page whose ``<title>`` carries one, that runs Cloudflare's challenge scripts, or
    that has hardly any links and a bot-wall vendor's script, or a CAPTCHA widget with a bot
    phrase ("unusual traffic"). A product page that mentions "captcha" or "access denied" in
    its text is a success. Other 2xx are successes; everything else (404, 500, a redirect) is
    neither.
    """
    status = result.status
    if status in (403, 429, 503):
        marker = _marker_in(result, result.body[:MAX_MARKER_SCAN_BYTES].lower())
        if marker:
            return Signal.BLOCK, f"challenge page (HTTP {status}, {marker!r})"
        if status == 429:
            return Signal.BLOCK, f"HTTP {status}"
    if status in REFUSALS:
        return Signal.REFUSED, f"HTTP {status}"
    if not 200 <= status < 300:
        return Signal.NONE, ""
    if len(result.body) <= MAX_CHALLENGE_BYTES and result.is_html:
        reason = _challenge_reason(result.body)
        if reason:
            return Signal.BLOCK, f"challenge page (HTTP {status}, {reason})"
    return Signal.SUCCESS, ""


def told_domain(signal: Signal, reason: str, *, succeeded_before: bool) -> tuple[Signal, str]:
    """What a judged response tells its domain's block window: a refusal of a URL that
    succeeded before (a revisit of a page fetched once) is a block, not the URL's own fate."""
    if signal is Signal.REFUSED and succeeded_before:
        return Signal.BLOCK, f"{reason} to a URL that succeeded before"
    return signal, reason


def _marker_in(result: FetchResult, lowered: bytes) -> str:
    if not result.is_html:
        return ""
    for marker in BAN_MARKERS:
        if marker.encode() in lowered:
            return marker
    return ""


def _challenge_reason(body: bytes) -> str:
    title = _TITLE.search(body)
    if title is not None:
        said = title.group(1).lower()
        for marker in BAN_MARKERS:
            if marker.encode() in said:
                return f"title says {marker!r}"
    # Each regex runs only when a word all its matches contain is in the page: a substring
    # test is ~100 times cheaper than the regex's search (run on every small 200 page), and
    # most pages hold none of the words at all.
    if _ANY_WORD.search(body) is None:
        return ""
    lowered = body.lower()
    found = _search(_CHALLENGE_SCRIPTS, lowered, _SCRIPT_WORDS)
    if found is not None:
        return f"{found.group(0).decode()!r} script"
    wall = _search(_BOT_WALL, lowered, _WALL_WORDS)
    widget = _search(_CAPTCHA_WIDGET, lowered, _WIDGET_WORDS)
    if wall is None and widget is None:
        return ""
    few_links = len(_LINK.findall(lowered)) <= MAX_CHALLENGE_LINKS
    if wall is not None and few_links:
        return f"{wall.group(1).decode()!r} CAPTCHA"
    if widget is not None and few_links:
        for phrase in BOT_PHRASES:
            if phrase.encode() in lowered:
                name = (widget.group(1) or widget.group(2)).decode()
                return f"{name!r} CAPTCHA saying {phrase!r}"
    return ""


def _search(
    pattern: re.Pattern[bytes], lowered: bytes, needed: tuple[bytes, ...]
) -> re.Match[bytes] | None:
    """``pattern.search(lowered)``, skipped when no word of ``needed`` is in ``lowered``."""
    if not any(word in lowered for word in needed):
        return None
    return pattern.search(lowered)
