"""Regexes from a crawl definition, compiled with RE2: matching time linear in the text.

Every worker trusts the crawl definition (allow/deny rules, parser patterns). With Python's
backtracking ``re`` one pattern such as ``(\\w+/?)+$`` takes seconds per URL, doubling with each
character; RE2 (``google-re2``) never backtracks (docs/decisions/0009-regex-cost.md has the
figures). RE2 has no backreferences and no lookaround: such a pattern is a ``ConfigError``
naming the setting, at load, not a slow crawl later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import re2

from crawlfleet.errors import ConfigError

MAX_PROGRAM_BYTES = 8 * 1024 * 1024  # RE2's memory budget per pattern


class Match(Protocol):
    def group(self, index: int = 0) -> str: ...


class Pattern(Protocol):
    """What callers use of a compiled pattern (``re.Pattern`` has the same methods)."""

    @property
    def pattern(self) -> str: ...

    @property
    def groups(self) -> int: ...

    def search(self, text: str) -> Match | None: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is raised, not written to stderr by RE2 itself
    options.max_mem = MAX_PROGRAM_BYTES
    return options


def compile_pattern(pattern: str, what: str) -> Pattern:
    """``pattern`` compiled with RE2; a pattern RE2 refuses is a ``ConfigError`` naming ``what``."""
    try:
        compiled: Pattern = re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ConfigError(
            f"bad setting {what!r}: regex {pattern!r} is not accepted ({reason}; "
            "backreferences and lookaround are not supported, see docs/decisions/0009)"
        ) from None
    return compiled


def compile_any(patterns: Sequence[str], what: str) -> Pattern | None:
    """One pattern matching where any of ``patterns`` matches; None when there are none."""
    if not patterns:
        return None
    for pattern in patterns:
        compile_pattern(pattern, what)  # names the bad one, not the union
    return compile_pattern("|".join(f"(?:{p})" for p in patterns), what)
