"""A robots.txt file read as RFC 9309 and Google's parser read it, for one product token.

Reading (``parse_robots``), byte by byte as Google does (decision 0039):

- A UTF-8 byte order mark at the start, whole or cut, is skipped. Lines end at CR, LF or
  CRLF; a line keeps its first ``MAX_LINE_BYTES`` bytes (Google's 8 x 2083), the rest is cut.
- ``#`` starts a comment. A line is ``key: value``; without a colon, ``key value`` is taken
  when the value is one word. Keys are matched by their start, case-insensitively, with
  Google's accepted typos (``useragent``, ``dissallow``, ``site-map``...).
- A group is one or more ``User-agent`` lines and the lines after them; the next
  ``User-agent`` line after an ``Allow``/``Disallow`` starts a new group. Other lines
  (``Sitemap``, ``Crawl-delay``, unknown ones) never end a group. Rules outside a group are
  ignored.
- A ``User-agent`` value names our group when its product token (the value up to the first
  character outside ``[A-Za-z_-]``, so ``crawlfleet/1.0`` and ``crawlfleet bot`` both read
  ``crawlfleet``) equals ours, case-insensitively; ``*`` is the global group. Every group
  naming us counts, merged; the global groups count only when none names us.
- An ``Allow``/``Disallow`` pattern has its non-ASCII bytes percent-encoded and its
  escapes' hex digits upper-cased; an empty pattern matches nothing. ``*`` is any run of
  characters, a final ``$`` the end of the target. Google's extra: an allowed
  ``.../index.htm...`` also allows its directory (``.../$``).
- ``Crawl-delay`` (seconds, finite, >= 0) and ``Request-rate`` (``n/m[smhd]``) of the groups
  that apply; neither is in RFC 9309 nor read by Google. ``Sitemap`` lines anywhere.

Matching (``RobotsRules.allowed``) takes the request target (path and query, as the request
will send them) and compares it as it is, its escapes' hex digits upper-cased: the longest
matching pattern wins, ``Allow`` on a tie; no match allows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_LINE_BYTES = 8 * 2083 - 1
"""Bytes of one line kept (Google's buffer of 8 x 2083 bytes, one for its terminator)."""

_BOM = b"\xef\xbb\xbf"
_AGENT_KEYS = (b"user-agent", b"useragent", b"user agent")
_ALLOW_KEYS = (b"allow",)
_DISALLOW_KEYS = (b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw")
_SITEMAP_KEYS = (b"sitemap", b"site-map")
_DELAY_KEYS = (b"crawl-delay", b"crawl delay", b"crawldelay")
_RATE_KEYS = (b"request-rate", b"request rate")
_TOKEN = re.compile(rb"[A-Za-z_-]*")
_TOKEN_TEXT = re.compile(r"[A-Za-z_-]+")
_ESCAPE = re.compile(rb"%[0-9A-Fa-f]{2}")
_ESCAPE_TEXT = re.compile(r"%[0-9A-Fa-f]{2}")
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*([smhd]?)", re.IGNORECASE)
_RATE_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def valid_token(token: str) -> bool:
    """Whether ``token`` can name a group: letters, ``_`` and ``-`` only, not empty."""
    return _TOKEN_TEXT.fullmatch(token) is not None


def escape_pattern(pattern: bytes) -> str:
    """A rule's pattern as it is compared: non-ASCII bytes as ``%XX``, escapes upper-cased."""
    if b"%" in pattern:
        pattern = _ESCAPE.sub(lambda m: m.group().upper(), pattern)
    if pattern.isascii():
        return pattern.decode("ascii")
    return "".join(chr(b) if b < 0x80 else f"%{b:02X}" for b in pattern)


def path_and_query(url: str) -> str:
    """The request target of an absolute URL written as it is: path and query, no fragment.

    Non-ASCII characters are percent-encoded as UTF-8, as a request sends them.
    """
    scheme_end = url.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    ends = [at for at in (url.find(c, start) for c in "/?;#") if at >= 0]
    at = min(ends) if ends else len(url)
    target = url[at:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    if not target.isascii():
        target = _NON_ASCII.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), target)
    return target


@dataclass(frozen=True, slots=True)
class _Rule:
    """One ``Allow``/``Disallow`` line; ``priority``: the pattern's length in octets."""

    priority: int
    allow: bool
    pattern: str
    matches: Callable[[str], bool]


def _wild(pattern: str) -> bool:
    return "*" in pattern or pattern.endswith("$")


def _rule(pattern: str, allow: bool) -> _Rule:
    """The rule with its cheapest test: a prefix, a whole target, or pieces between ``*``."""
    priority = len(pattern)
    anchored = pattern.endswith("$")
    body = pattern[:-1] if anchored else pattern
    if "*" not in body:
        if anchored:
            return _Rule(priority, allow, pattern, body.__eq__)
        return _Rule(priority, allow, pattern, lambda target: target.startswith(body))
    return _Rule(priority, allow, pattern, _wildcard_test(body.split("*"), anchored))


def _wildcard_test(pieces: list[str], anchored: bool) -> Callable[[str], bool]:
    """A test of ``pieces`` joined by ``*``: each found leftmost after the one before (linear
    in the target; a regular expression backtracks for seconds on ``/*a*a*a*a*b``)."""
    first, middle, last = pieces[0], [p for p in pieces[1:-1] if p], pieces[-1]

    def matches(target: str) -> bool:
        if not target.startswith(first):
            return False
        at = len(first)
        for piece in middle:
            at = target.find(piece, at)
            if at < 0:
                return False
            at += len(piece)
        if anchored:
            return len(target) - len(last) >= at and target.endswith(last)
        return not last or target.find(last, at) >= 0

    return matches


@dataclass(slots=True)
class _Group:
    """One group as read: the tokens it names, its rules and its rate lines."""

    agents: set[str] = field(default_factory=set)
    everyone: bool = False
    rules: list[tuple[str, bool]] = field(default_factory=list)
    ruled: bool = False
    delays_s: list[float] = field(default_factory=list)


class RobotsRules:
    """What one robots.txt says to one product token."""

    __slots__ = ("_plain", "_rules", "_wild", "crawl_delay_s", "sitemaps")

    def __init__(self, rules: list[_Rule], crawl_delay_s: float | None, sitemaps: list[str]):
        # Longest first, Allow before Disallow on a tie: the first match decides.
        rules.sort(key=lambda r: (-r.priority, not r.allow))
        self._rules = tuple(rules)
        self._wild = tuple(r for r in rules if _wild(r.pattern))
        # A target starting with none of the plain patterns can match only a wild one.
        self._plain = tuple(r.pattern for r in rules if not _wild(r.pattern))
        self.crawl_delay_s = crawl_delay_s
        self.sitemaps = sitemaps

    def allowed(self, target: str) -> bool:
        """Whether the request target (``/path?query``, as it will be sent) may be fetched."""
        if "%" in target:
            target = _ESCAPE_TEXT.sub(lambda m: m.group().upper(), target)
        rules = self._rules if target.startswith(self._plain) else self._wild
        for rule in rules:
            if rule.matches(target):
                return rule.allow
        return True


def parse_robots(body: bytes, token: str) -> RobotsRules:
    """The rules of ``body`` for ``token`` (compared case-insensitively)."""
    token = token.lower()
    groups: list[_Group] = []
    sitemaps: list[str] = []
    group: _Group | None = None
    skip = 0
    while skip < len(_BOM) and skip < len(body) and body[skip] == _BOM[skip]:
        skip += 1
    for raw in body[skip:].splitlines():
        key, value = _key_value(raw[:MAX_LINE_BYTES])
        if key is None:
            continue
        if key.startswith(_AGENT_KEYS):
            if group is None or group.ruled:
                group = _Group()
                groups.append(group)
            if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
                group.everyone = True
            else:
                name = _TOKEN.match(value)
                if name is not None and name.group():
                    group.agents.add(name.group().decode("ascii").lower())
        elif key.startswith(_ALLOW_KEYS) or key.startswith(_DISALLOW_KEYS):
            if group is None:
                continue  # a rule outside any group
            group.ruled = True
            if value:
                group.rules.append((escape_pattern(value), key.startswith(_ALLOW_KEYS)))
        elif key.startswith(_SITEMAP_KEYS):
            if value:
                sitemaps.append(value.decode("utf-8", errors="replace"))
        elif group is not None and key in _DELAY_KEYS:
            delay_s = _seconds(value)
            if delay_s is not None:
                group.delays_s.append(delay_s)
        elif group is not None and key in _RATE_KEYS:
            delay_s = _rate_interval_s(value)
            if delay_s is not None:
                group.delays_s.append(delay_s)
    ours = [g for g in groups if token in g.agents]
    if not ours:
        ours = [g for g in groups if g.everyone]
    rules: list[_Rule] = []
    for group in ours:
        for pattern, allow in group.rules:
            rules.append(_rule(pattern, allow))
            if allow:
                rules.extend(_directory_rule(pattern))
    delays_s = [d for g in ours for d in g.delays_s]
    return RobotsRules(rules, max(delays_s) if delays_s else None, sitemaps)


def _key_value(line: bytes) -> tuple[bytes | None, bytes]:
    """The lower-case key and the value of a line; no key for blanks, comments and garbage."""
    line = line.partition(b"#")[0].strip()
    if not line:
        return None, b""
    key, colon, value = line.partition(b":")
    if not colon:
        words = line.split(None, 1)
        if len(words) != 2 or len(words[1].split()) != 1:
            return None, b""
        key, value = words
    key = key.strip()
    if not key:
        return None, b""
    return key.lower(), value.strip()


def _directory_rule(pattern: str) -> list[_Rule]:
    """Google's extra for an ``Allow`` ending in ``/index.htm...``: its directory, exactly."""
    slash = pattern.rfind("/")
    if slash < 0 or not pattern.startswith("/index.htm", slash):
        return []
    return [_rule(pattern[: slash + 1] + "$", True)]


def _seconds(value: bytes) -> float | None:
    try:
        delay_s = float(value)
    except ValueError:
        return None
    return delay_s if math.isfinite(delay_s) and delay_s >= 0 else None


def _rate_interval_s(value: bytes) -> float | None:
    """The interval a ``Request-rate: n/m[smhd]`` implies, in seconds."""
    found = _RATE.match(value.decode("ascii", errors="replace"))
    if found is None:
        return None
    requests, period, unit = int(found[1]), int(found[2]), found[3].lower()
    if requests <= 0 or period <= 0:
        return None
    return period * _RATE_UNIT_S[unit] / requests
