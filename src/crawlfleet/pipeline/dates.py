"""Turning a scraped date text into ISO 8601."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from email.utils import parsedate_to_datetime

# Unambiguous formats only: a day/month order must be asked for with an explicit format.
DEFAULT_FORMATS: tuple[str, ...] = (
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y/%m/%d",
    "%d %B %Y",
    "%d %b %Y",
    "%B %d, %Y",
    "%b %d, %Y",
    "%B %d %Y",
    "%b %d %Y",
    "%d %B %Y %H:%M",
    "%B %d, %Y %H:%M",
)


def to_iso(value: object, formats: Sequence[str] = DEFAULT_FORMATS) -> str | None:
    """``value`` as ISO 8601, or None when it is not a date we can read.

    Accepts ISO 8601 itself, RFC 2822 (``Tue, 05 Nov 2024 10:00:00 GMT``), epoch seconds
    (int/float, read as UTC) and ``formats`` (``strptime`` syntax, tried in order). A value
    without a time of day stays a date (``2024-11-05``); a naive time stays naive.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC).isoformat()
    if not isinstance(value, str) or not value.strip():
        return None
    text = " ".join(value.split())
    for parse in (date.fromisoformat, datetime.fromisoformat):
        try:
            return parse(text).isoformat()
        except ValueError:
            pass
    try:
        return parsedate_to_datetime(text).isoformat()
    except (TypeError, ValueError, IndexError):
        pass
    for fmt in formats:
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError:
            continue
        has_time = any(code in fmt for code in ("%H", "%I", "%M", "%S"))
        return parsed.isoformat() if has_time else parsed.date().isoformat()
    return None
