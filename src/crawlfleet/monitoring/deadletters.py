"""Dead letters grouped by error class, and requeue or purge of a whole class.

A dead letter's class is that of its **last** error (the one that buried it), made short and
stable by ``error_class``: the URL, host, port, sizes and timings of the text are dropped, so
the 500 errors of a thousand URLs are one class, ``HTTP 500``. The CLI (``crawlfleet dlq``)
and the dashboard list, requeue and purge by these names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from crawlfleet.errors import ConfigError
from crawlfleet.frontier.protocols import DeadLetters
from crawlfleet.records import DeadLetter

PAGE = 1000
"""Dead letters read per ``dead_letters`` call."""
BATCH = 500
"""Fingerprints per ``requeue_dead`` / ``purge_dead`` call."""
SAMPLE_URLS = 3
"""URLs kept per class as examples."""
MAX_CLASS_CHARS = 60

_HTTP = re.compile(r"HTTP (\d{3})\b")
_STATUS_PREFIXES = ("blocked: ", "refused: ")
"""What the crawl step puts before the status of a ban and of a refused URL (decision 0044)."""
_PARSER = re.compile(r"parser '[^']*': (\w+)")
_MISMATCH = re.compile(r"mismatch: ([^:]+):")
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S*", re.IGNORECASE)
_LEADING_URL = re.compile(r"^[a-z][a-z0-9+.-]*:(?://)?\S*?: ", re.IGNORECASE)
_EXCEPTION = re.compile(r"^(?:unexpected )?([A-Z]\w*(?:Error|Exception|Exceeded)):")
_CUT = re.compile(r"[\d(\[{'\"]")

_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), name)
    for pattern, name in (
        (r"^robots\.txt unavailable", "robots unavailable"),
        (r"^lease expired", "lease expired"),
        (r"^blocked: challenge page", "blocked: challenge page"),
        (r"^timeout\b|\btimed? ?out\b", "timeout"),
        (r"\bDNS lookup failed\b|name or service not known|nodename nor servname", "DNS"),
        (r"\bexceeds \d+ bytes|decompresses to more than|grew past \d+ bytes", "too large"),
        (r"connection refused|connect call failed", "connection refused"),
        (r"connection reset", "connection reset"),
        (r"^cannot connect to ", "connection failed"),
        (r"\bis not allowed\b", "forbidden address"),
        (r"^TLS certificate\b", "TLS certificate"),
        (r"^redirect loop\b", "redirect loop"),
        (r"more than \d+ redirects", "too many redirects"),
        (r"malformed response", "malformed response"),
        (r"corrupt \w+ body", "corrupt body"),
    )
)


def error_class(error: str) -> str:
    """A short, stable name for the kind of failure an error text describes.

    ``HTTP <status>``, ``blocked: HTTP <status>``, ``refused: HTTP <status>``, ``parse
    error: <ExceptionType>``, ``mismatch: <parser>`` (a page that missed its parser's
    expectations), a fixed name for the fetcher's failures (``timeout``, ``DNS``,
    ``connection refused``, ``too
    large``, ...), the exception type of a text that names one first (after a leading URL),
    else the text without a leading URL, cut at its first digit, quote, bracket or URL
    (``unknown`` when nothing is left).
    """
    text = " ".join(error.split())
    mismatch = _MISMATCH.match(text)
    if mismatch is not None:
        return f"mismatch: {mismatch.group(1)}"
    parser = _PARSER.match(text)
    if parser is not None:
        return f"parse error: {parser.group(1)}"
    prefix = next((p for p in _STATUS_PREFIXES if text.startswith(p)), "")
    status = _HTTP.match(text.removeprefix(prefix))
    if status is not None:
        return f"{prefix}HTTP {status.group(1)}"
    for pattern, name in _RULES:
        if pattern.search(text):
            return name
    rest = _LEADING_URL.sub("", text, count=1)
    exception = _EXCEPTION.match(rest)
    if exception is not None:
        return exception.group(1)
    rest = _URL.split(rest, maxsplit=1)[0]
    rest = _CUT.split(rest, maxsplit=1)[0].strip(" :;,.-")
    return rest[:MAX_CLASS_CHARS].rstrip() or "unknown"


def letter_class(letter: DeadLetter) -> str:
    """The class of a dead letter: that of its last error."""
    return error_class(letter.errors[-1]) if letter.errors else "unknown"


@dataclass(slots=True)
class ClassGroup:
    """One error class of the dead letters: how many, and a few of their URLs."""

    name: str
    count: int = 0
    sample_urls: list[str] = field(default_factory=list)


async def by_class(frontier: DeadLetters, limit: int = 10_000) -> list[ClassGroup]:
    """The classes of the oldest ``limit`` dead letters, most frequent first (ties by name)."""
    groups: dict[str, ClassGroup] = {}
    offset = 0
    while offset < limit:
        page = await frontier.dead_letters(min(PAGE, limit - offset), offset)
        for letter in page:
            name = letter_class(letter)
            group = groups.setdefault(name, ClassGroup(name))
            group.count += 1
            if len(group.sample_urls) < SAMPLE_URLS:
                group.sample_urls.append(letter.request.url)
        if len(page) < PAGE:
            break
        offset += len(page)
    return sorted(groups.values(), key=lambda g: (-g.count, g.name))


async def fingerprints_of(frontier: DeadLetters, name: str, domain: str | None = None) -> list[str]:
    """The fingerprints of every dead letter of class ``name`` (of ``domain`` when given),
    read before anything moves."""
    found: list[str] = []
    offset = 0
    while True:
        page = await frontier.dead_letters(PAGE, offset)
        found.extend(
            x.request.fingerprint
            for x in page
            if letter_class(x) == name and domain in (None, x.request.domain)
        )
        if len(page) < PAGE:
            return found
        offset += len(page)


async def resolve_fingerprints(frontier: DeadLetters, prefixes: Sequence[str]) -> list[str]:
    """The full fingerprint of the dead letter each of ``prefixes`` starts (as ``dlq list``
    prints them, cut to 12 characters); ``ConfigError`` for a prefix naming none or several."""
    known: list[str] = []
    offset = 0
    while True:
        page = await frontier.dead_letters(PAGE, offset)
        known.extend(letter.request.fingerprint for letter in page)
        if len(page) < PAGE:
            break
        offset += len(page)
    found: list[str] = []
    for prefix in prefixes:
        matches = [fingerprint for fingerprint in known if fingerprint.startswith(prefix)]
        if not matches:
            raise ConfigError(f"no dead letter with fingerprint {prefix!r} (see: dlq list)")
        if len(matches) > 1:
            raise ConfigError(
                f"fingerprint {prefix!r} starts {len(matches)} dead letters: give more"
            )
        found.append(matches[0])
    return found


async def requeue_class(frontier: DeadLetters, name: str, domain: str | None = None) -> int:
    """Put every dead letter of class ``name`` (of ``domain`` when given) back in its queue;
    how many moved."""
    fingerprints = await fingerprints_of(frontier, name, domain)
    moved = 0
    for start in range(0, len(fingerprints), BATCH):
        moved += await frontier.requeue_dead(fingerprints[start : start + BATCH])
    return moved


async def purge_class(frontier: DeadLetters, name: str) -> int:
    """Forget every dead letter of class ``name`` (they stay seen); how many."""
    fingerprints = await fingerprints_of(frontier, name)
    purged = 0
    for start in range(0, len(fingerprints), BATCH):
        purged += await frontier.purge_dead(fingerprints[start : start + BATCH])
    return purged
