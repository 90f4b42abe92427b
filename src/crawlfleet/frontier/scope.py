"""Which request URLs belong to a crawl: allowed domains, allow/deny patterns, depth, traps.

The trap rules (``TrapLimits``) are on by default, because a crawl without them never ends on
a calendar, a relative-link loop or a faceted search: a URL longer than 2,083 characters
(Internet Explorer's limit, Scrapy's ``URLLENGTH_LIMIT``), a path in which one segment occurs
more than 3 times (``/a/b/a/b/a/b/a/``), or a query of more than 16 parameters is out of
scope. Each limit is a setting; a user lifts one by raising it. A refusal names its counter
(``Refusal.reason``): a limit (``counters.Limit``) or the user's choice of scope
(``counters.Filtered``).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from crawlfleet.counters import Filtered, Limit
from crawlfleet.patterns import compile_any as _compile
from crawlfleet.urls import host_of, registrable_domain


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a URL is out of scope: the reason it is counted under, and a sentence."""

    reason: Limit | Filtered
    text: str

    def __str__(self) -> str:
        return self.text


_MAX_DEPTH = Refusal(Limit.MAX_DEPTH, "max depth")
_OFF_SITE = Refusal(Filtered.OFF_SITE, "off-site")
_DENIED = Refusal(Filtered.DENY, "denied by pattern")
_NOT_ALLOWED = Refusal(Filtered.ALLOW, "not allowed by pattern")
_HIERARCHICAL = ("http://", "https://", "file://")
_REMOVED_BY_URLSPLIT = re.compile("[\t\r\n]")


@dataclass(frozen=True, slots=True)
class TrapLimits:
    """Spider-trap rules; the defaults are those of ``Settings`` (``runtime.options.trap_limits``)."""

    max_url_chars: int = 2083
    max_path_segment_repeats: int = 3
    max_query_params: int = 16

    def reason_to_skip(self, url: str) -> Refusal | None:
        """None when ``url`` passes every rule, else which one it breaks."""
        if len(url) > self.max_url_chars:
            return Refusal(Limit.MAX_URL_CHARS, f"URL longer than {self.max_url_chars} characters")
        repeats = self.max_path_segment_repeats
        # Split only URLs with enough "/" or "&" to break a rule ("//" after the scheme), and
        # count the segments only of a path with enough repeated parts to break it.
        if url.count("/") - 2 > repeats and _repeats_at_most(url) > repeats:
            segments = Counter(s for s in urlsplit(url).path.split("/") if s)
            if segments:
                segment, count = segments.most_common(1)[0]
                if count > repeats:
                    return Refusal(
                        Limit.MAX_PATH_SEGMENT_REPEATS,
                        f"path segment {segment[:40]!r} repeated {count} times",
                    )
        most = self.max_query_params
        if url.count("&") >= most:
            params = sum(1 for pair in urlsplit(url).query.split("&") if pair)
            if params > most:
                return Refusal(
                    Limit.MAX_QUERY_PARAMS, f"{params} query parameters (more than {most})"
                )
        return None


def _repeats_at_most(url: str) -> int:
    """A bound on how often one segment occurs in the path ``urlsplit`` gives for ``url``
    (~0.5 µs; splitting the URL and counting took ~4): the URL up to its query or fragment,
    split at "/", holds each segment of the path, and a part occurring k times leaves k - 1
    parts out of the set of its parts. Other URLs than ``http(s)://`` and ``file://`` ones,
    or with characters ``urlsplit`` removes, get no bound."""
    if not url.startswith(_HIERARCHICAL) or _REMOVED_BY_URLSPLIT.search(url) is not None:
        return sys.maxsize
    parts = url.partition("?")[0].partition("#")[0].split("/")
    return len(parts) - len(set(parts)) + 1


DEFAULT_TRAP_LIMITS = TrapLimits()


class Scope:
    """Decides whether a URL as requested may enter the frontier.

    ``allowed_domains`` match a host and all its subdomains; when empty, the registrable
    domains of the seeds are allowed. ``file:`` URLs are in scope only when a seed is one.
    """

    def __init__(
        self,
        *,
        allowed_domains: Iterable[str],
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        max_depth: int | None = None,
        traps: TrapLimits = DEFAULT_TRAP_LIMITS,
    ) -> None:
        self._domains = frozenset(d.lower().lstrip(".") for d in allowed_domains)
        self._allow = _compile(allow, "allow")
        self._deny = _compile(deny, "deny")
        self.max_depth = max_depth
        self.traps = traps
        self._files = "file" in self._domains

    @classmethod
    def for_seeds(
        cls,
        seeds: Iterable[str],
        *,
        allowed_domains: Sequence[str] = (),
        allow: Sequence[str] = (),
        deny: Sequence[str] = (),
        max_depth: int | None = None,
        traps: TrapLimits = DEFAULT_TRAP_LIMITS,
    ) -> Scope:
        domains = list(allowed_domains) or [
            registrable_domain(host_of(s)) if host_of(s) else "file" for s in seeds
        ]
        return cls(
            allowed_domains=domains, allow=allow, deny=deny, max_depth=max_depth, traps=traps
        )

    def domain_allowed(self, host: str) -> bool:
        """Whether ``host`` is an allowed domain or a subdomain of one.

        Asked for every link: the host and each of its parents (``a.b.c``, ``b.c``, ``c``) are
        looked up in a set, a few lookups whatever the number of allowed domains.
        """
        if not host:
            return self._files
        domains = self._domains
        while True:
            if host in domains:
                return True
            dot = host.find(".")
            if dot < 0:
                return False
            host = host[dot + 1 :]

    def reason_to_skip(self, url: str, depth: int) -> Refusal | None:
        """None when the URL is in scope, else why not."""
        if self.max_depth is not None and depth > self.max_depth:
            return _MAX_DEPTH
        return self.url_refusal(url)

    def url_refusal(self, url: str) -> Refusal | None:
        """``reason_to_skip`` but for the depth: what the URL alone decides."""
        trap = self.traps.reason_to_skip(url)
        if trap is not None:
            return trap
        if not self.domain_allowed(host_of(url)):
            return _OFF_SITE
        if self._deny is not None and self._deny.search(url):
            return _DENIED
        if self._allow is not None and not self._allow.search(url):
            return _NOT_ALLOWED
        return None
