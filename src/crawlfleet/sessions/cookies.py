"""A cookie jar that sends each cookie only where RFC 6265 lets it go.

Every jar of a crawl (a login session, a crawl session of the proxy link, the browser's
context that shares it) keeps cookies with their scope: the host that set a cookie without
a ``Domain`` attribute gets it back alone (host-only); a ``Domain`` cookie goes to that
domain and its subdomains, never to a public suffix (``co.uk``) nor to an IP address it was
not set by; a ``Path`` cookie to that path and below; a ``Secure`` cookie over https only
(and, as browsers do (RFC 6265bis), only an https page may set one); an expired cookie is
dropped. Before this a jar was one flat name -> value map, sent to every host a login
redirect or a session reached.

Stores keep a jar as a mapping of strings (``CookieJar.stored``): the key names the cookie
and its scope, ``name;domain;path;flags;expires`` (``flags``: ``h`` host-only, ``s`` secure;
``expires``: epoch seconds or empty for a session cookie), the value is the cookie's value.
A key of a bare name, as jars were stored before, is a cookie of the jar's owner domain
(the login domain or the session's politeness key) on every path, as it was sent then.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from crawlfleet.urls import is_public_suffix

log = logging.getLogger(__name__)

MAX_COOKIES = 300
"""Cookies one jar keeps (RFC 6265 asks for at least 50 a domain); past it the oldest go,
with a warning."""
MAX_COOKIE_BYTES = 4096
"""A cookie's name and value together (RFC 6265 section 6.1's minimum); a longer one is
refused, with a warning."""
_SPLIT = re.compile(r",\s*(?=[^;,\s=]+=)")
"""Repeated Set-Cookie headers arrive joined by ``", "``; an Expires date has a comma too,
but what follows it is no ``name=``."""


@dataclass(frozen=True, slots=True)
class Cookie:
    """One stored cookie and its scope; ``expires_at`` epoch seconds, None for a session
    cookie."""

    name: str
    value: str
    domain: str
    path: str = "/"
    host_only: bool = True
    secure: bool = False
    expires_at: float | None = None

    @property
    def identity(self) -> tuple[str, str, str]:
        """What a new cookie replaces: the one of the same name, domain and path."""
        return (self.name, self.domain, self.path)

    def key(self) -> str:
        flags = ("h" if self.host_only else "") + ("s" if self.secure else "")
        expires = "" if self.expires_at is None else repr(self.expires_at)
        return f"{self.name};{self.domain};{self.path};{flags};{expires}"

    def goes_to(self, scheme: str, host: str, path: str, now: float) -> bool:
        """Whether a request to ``scheme://host/path`` at ``now`` sends this cookie."""
        if self.expires_at is not None and self.expires_at <= now:
            return False
        if self.secure and scheme != "https":
            return False
        if host != self.domain and (self.host_only or not domain_matches(host, self.domain)):
            return False
        return path_matches(path, self.path)


def domain_matches(host: str, domain: str) -> bool:
    """RFC 6265 section 5.1.3: ``host`` is ``domain`` or a name under it (never an IP)."""
    return host == domain or (host.endswith(f".{domain}") and not _is_ip(host))


def path_matches(path: str, cookie_path: str) -> bool:
    """RFC 6265 section 5.1.4: ``cookie_path`` is ``path`` or a directory above it."""
    if path == cookie_path:
        return True
    return path.startswith(cookie_path) and (
        cookie_path.endswith("/") or path[len(cookie_path)] == "/"
    )


def default_path(path: str) -> str:
    """RFC 6265 section 5.1.4: the directory of a request path."""
    if not path.startswith("/") or path.count("/") == 1:
        return "/"
    return path[: path.rindex("/")]


def set_cookie_lines(header: str | None) -> list[str]:
    """The Set-Cookie header values of a (maybe comma-joined) header."""
    return [line for line in _SPLIT.split(header or "") if line.strip()]


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _expiry(attributes: Mapping[str, str], now: float) -> float | None:
    """Max-Age wins over Expires (section 5.3 step 3); None: a session cookie."""
    max_age = attributes.get("max-age")
    if max_age is not None and re.fullmatch(r"-?\d+", max_age.strip()):
        return now + int(max_age) if int(max_age) > 0 else float("-inf")
    expires = attributes.get("expires")
    if expires is not None:
        try:
            return parsedate_to_datetime(expires.strip()).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None


def parse_set_cookie(line: str, url: str, now: float) -> Cookie | None:
    """The cookie one Set-Cookie line stores for a response from ``url``; None when RFC 6265
    section 5.3 says to ignore it (no ``name=``, a Domain the host is not under, a public
    suffix, a Secure cookie from http). An expired cookie comes back with ``expires_at`` in
    the past: it deletes its namesake."""
    pair, _, rest = line.partition(";")
    name, eq, value = pair.partition("=")
    name, value = name.strip(), value.strip()
    if not eq or not name or len(name) + len(value) > MAX_COOKIE_BYTES:
        if len(name) + len(value) > MAX_COOKIE_BYTES:
            log.warning("a cookie of %d bytes from %s refused", len(name) + len(value), url)
        return None
    attributes: dict[str, str] = {}
    for part in rest.split(";"):
        key, _, val = part.partition("=")
        attributes[key.strip().lower()] = val.strip()
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not host:
        return None
    secure = "secure" in attributes
    if secure and scheme != "https":
        return None
    domain = attributes.get("domain", "").lstrip(".").lower()
    host_only = True
    if domain:
        if is_public_suffix(domain) or _is_ip(domain):
            if domain != host:
                return None
        elif not domain_matches(host, domain):
            return None
        else:
            host_only = False
    path = attributes.get("path", "")
    if not path.startswith("/"):
        path = default_path(parts.path or "/")
    return Cookie(
        name=name,
        value=value,
        domain=host if host_only else domain,
        path=path,
        host_only=host_only,
        secure=secure,
        expires_at=_expiry(attributes, now),
    )


def _from_key(key: str, value: str, owner: str) -> Cookie:
    fields = key.split(";")
    if len(fields) != 5:  # a bare name: stored before jars kept scopes
        return Cookie(key, value, owner.lower(), "/", host_only=False)
    name, domain, path, flags, expires = fields
    return Cookie(
        name,
        value,
        domain,
        path,
        host_only="h" in flags,
        secure="s" in flags,
        expires_at=float(expires) if expires else None,
    )


class CookieJar:
    """The cookies one session keeps, by name, domain and path, in the order they came."""

    def __init__(self, cookies: Iterable[Cookie] = ()) -> None:
        self._cookies: dict[tuple[str, str, str], Cookie] = {}
        for cookie in cookies:
            self._cookies[cookie.identity] = cookie

    @classmethod
    def from_stored(cls, stored: Mapping[str, str], owner: str) -> CookieJar:
        """The jar of a store's mapping (``stored``); ``owner``: the domain bare names are of."""
        return cls(_from_key(key, value, owner) for key, value in stored.items())

    def stored(self) -> dict[str, str]:
        """The mapping a store keeps (see the module docstring)."""
        return {cookie.key(): cookie.value for cookie in self._cookies.values()}

    def __len__(self) -> int:
        return len(self._cookies)

    def __iter__(self) -> Iterator[Cookie]:
        return iter(list(self._cookies.values()))

    def receive(self, url: str, set_cookie: str | None, now: float) -> bool:
        """Keep what the Set-Cookie header(s) of a response from ``url`` set or delete;
        whether the jar changed."""
        changed = False
        for line in set_cookie_lines(set_cookie):
            cookie = parse_set_cookie(line, url, now)
            if cookie is None:
                continue
            if cookie.expires_at is not None and cookie.expires_at <= now:
                changed = self._cookies.pop(cookie.identity, None) is not None or changed
                continue
            if self._cookies.get(cookie.identity) != cookie:
                self._cookies.pop(cookie.identity, None)  # a new value goes last
                self._cookies[cookie.identity] = cookie
                changed = True
        while len(self._cookies) > MAX_COOKIES:
            oldest = next(iter(self._cookies))
            log.warning("cookie jar full (%d): dropped cookie %r", MAX_COOKIES, oldest[0])
            del self._cookies[oldest]
        return changed

    def header(self, url: str, now: float) -> str | None:
        """The Cookie header a request to ``url`` sends (section 5.4), or None: longer
        paths first, then in the order the cookies came."""
        parts = urlsplit(url)
        scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
        path = parts.path or "/"
        sent = [c for c in self._cookies.values() if c.goes_to(scheme, host, path, now)]
        if not sent:
            return None
        sent.sort(key=lambda c: -len(c.path))
        return "; ".join(f"{c.name}={c.value}" for c in sent)
