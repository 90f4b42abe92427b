"""URL canonicalization, fingerprints and politeness keys.

``UrlRules.canonical`` is the one place a URL is normalized: scheme and host lower-cased,
default ports dropped, fragment dropped, query arguments sorted, percent-encoding normalized
(``w3lib.url.canonicalize_url``), and tracking parameters removed (``utm_*``, session ids;
configurable, ``*`` is a suffix wildcard). Two URLs for the same page get the same canonical
form, hence the same ``fingerprint``.

Userinfo (``http://user:password@host/``) is dropped: a canonical URL is stored, logged and
exported, so it never carries a credential. A seed's credentials become a per-origin secret of
the fetcher (``fetchers.credentials``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import tldextract
from w3lib.url import canonicalize_url

from crawlfleet.errors import BadUrl
from crawlfleet.redact import redact

FETCHABLE_SCHEMES = frozenset({"http", "https", "file"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# An http(s) URL with a lower-case host, maybe a port, a path of unreserved characters and
# slashes, and nothing after it (no query, fragment, userinfo or percent sign).
_PLAIN_URL = re.compile(r"(https?)://[a-z0-9.-]+(?::([1-9][0-9]{0,4}))?/[A-Za-z0-9._~/-]*")

_PLAIN_ORIGIN = re.compile(r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(?=[/?#]|\Z)")
# The start of an http(s) URL with a plain lower-case host: no userinfo, no IPv6 brackets, no
# character ``urlsplit`` would strip or refuse.

_extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

URL_CACHE_SIZE = 16_384
"""Entries of each per-URL cache (``canonical``, ``host_of``): ~3 MB each when full.

Bounded small on purpose: a page's repeated links (navigation, pagination) stay cached, and a
cache sized to the whole site (100,000 entries took 18 and 15 MB) only made the first pages
of a crawl cheaper than the rest (see docs/decisions/0017)."""
HOST_CACHE_SIZE = 16_384
"""Entries of the per-host cache (``registrable_domain``)."""


def fingerprint(canonical_url: str) -> str:
    """A stable 128-bit hex id of a canonical URL (the first half of its SHA-1)."""
    return hashlib.sha1(canonical_url.encode("utf-8")).hexdigest()[:32]


def request_fingerprint(canonical_url: str, method: str = "GET", body: str = "") -> str:
    """The fingerprint of a request: its method, canonical URL and body.

    A GET without a body keeps the URL's ``fingerprint``, so crawls stored before requests
    had methods resume with the same ids. Headers and context do not count: the first
    request of a (method, URL, body) wins.
    """
    if method == "GET" and not body:
        return fingerprint(canonical_url)
    text = f"{method} {canonical_url}\n{body}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:32]


@lru_cache(maxsize=HOST_CACHE_SIZE)
def registrable_domain(host: str) -> str:
    """``shop.example.co.uk`` -> ``example.co.uk``; IPs and bare names are returned as given.

    Uses tldextract's bundled public-suffix snapshot: no network.
    """
    parts = _extract(host)
    return parts.top_domain_under_public_suffix or host


@lru_cache(maxsize=HOST_CACHE_SIZE)
def is_public_suffix(name: str) -> bool:
    """Whether ``name`` is a public suffix (``com``, ``co.uk``), under which anyone registers:
    no cookie may be scoped to it. From tldextract's bundled snapshot."""
    parts = _extract(name)
    return bool(parts.suffix) and not parts.domain and not parts.subdomain


def plain_origin(url: str) -> tuple[str, str, int | None] | None:
    """The scheme, host and port ``urlsplit`` gives for a URL that starts with a plain
    http(s) origin (``_PLAIN_ORIGIN``), told by one match (~0.4 µs against ~3); None for any
    other URL, which only ``urlsplit`` can tell. Checked against it by
    ``tests/unit/test_urls_fast_path.py``."""
    match = _PLAIN_ORIGIN.match(url)
    if match is None:
        return None
    scheme, host, port = match.groups()
    if port is None:
        return scheme, host, None
    number = int(port)
    return (scheme, host, number) if number <= 65535 else None


@lru_cache(maxsize=URL_CACHE_SIZE)
def host_of(url: str) -> str:
    """The lower-case host of a URL (empty for file: URLs); cached, as the scope check and the
    politeness key both ask for it on every link."""
    plain = plain_origin(url)
    if plain is not None:
        return plain[1]
    return (urlsplit(url).hostname or "").lower()


def already_canonical(url: str) -> bool:
    """Whether ``url`` is its own canonical form, told without parsing it (~1 µs; w3lib's
    ``canonicalize_url`` takes ~15 µs): a plain http(s) URL (``_PLAIN_URL``) with no dot
    segment (``/./``, ``/../``: w3lib removes them) and no default or out-of-range port.
    Checked against the full canonicalization by ``tests/unit/test_urls_fast_path.py``."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None or "/." in url:
        return False
    port = match.group(2)
    return port is None or (int(port) != _DEFAULT_PORTS[match.group(1)] and int(port) <= 65535)


class UrlRules:
    """Canonicalization with the crawl's tracking-parameter list, and its politeness key."""

    def __init__(self, strip_params: tuple[str, ...] | list[str] = (), key: str = "host") -> None:
        patterns = [p.lower() for p in strip_params]
        self._exact = frozenset(p for p in patterns if "*" not in p and "?" not in p)
        self._globs = tuple(p for p in patterns if p not in self._exact)
        self._by_domain = key == "domain"
        self.canonical = lru_cache(maxsize=URL_CACHE_SIZE)(self._canonical)  # type: ignore[method-assign]

    def _drop(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self._exact or any(fnmatch.fnmatchcase(lowered, g) for g in self._globs)

    def canonical(self, url: str) -> str:
        """The canonical form of an absolute URL (cached); raises ``BadUrl``."""
        return self._canonical(url)

    def _canonical(self, url: str) -> str:
        """The canonical form of an absolute URL; raises ``BadUrl`` when it cannot be one."""
        url = url.strip()
        if already_canonical(url):
            return url
        return self.full_canonical(url)

    def full_canonical(self, url: str) -> str:
        """``canonical`` without its cache and fast path: every step, on a stripped URL."""
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018  (raises ValueError on a bad port)
        except ValueError as exc:
            raise BadUrl(redact(f"malformed URL {url!r}: {exc}", url)) from None
        scheme = parts.scheme.lower()
        if scheme not in FETCHABLE_SCHEMES:
            raise BadUrl(redact(f"unsupported scheme in {url!r} (only http, https, file)", url))
        if scheme != "file" and not parts.hostname:
            raise BadUrl(redact(f"URL without a host: {url!r}", url))
        if "@" in parts.netloc:
            parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        if parts.port is not None and _DEFAULT_PORTS.get(scheme) == parts.port:
            parts = parts._replace(netloc=parts.netloc.rsplit(":", 1)[0])
        if parts.query and (self._exact or self._globs):
            kept = [
                (k, v)
                for k, v in parse_qsl(parts.query, keep_blank_values=True)
                if not self._drop(k)
            ]
            parts = parts._replace(query=urlencode(kept))
        url = urlunsplit(parts)
        try:
            return canonicalize_url(url, keep_fragments=False)
        except ValueError as exc:
            raise BadUrl(f"malformed URL {url!r}: {exc}") from None

    def politeness_key(self, canonical_url: str) -> str:
        """The domain politeness is counted on: the host, or its registrable domain."""
        host = host_of(canonical_url)
        if not host:
            return "file"
        return registrable_domain(host) if self._by_domain else host
