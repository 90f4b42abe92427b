"""Request URLs as a browser sends them, dedup keys, fingerprints and politeness keys.

A URL is parsed and serialized by the WHATWG URL Standard (``ada-url``; chosen by
measurement in docs/decisions/0040): a backslash is a slash, the host goes through UTS-46
(``faß.de`` is ``xn--fa-hia.de``) and IPv4 number forms are read (``0x7f.1`` is
``127.0.0.1``), dot segments are removed, the default port dropped, and what must be
percent-encoded is, as UTF-8. Escapes already there (``%3B``, ``%E9``) and the order of the
query are kept. ``UrlRules.target`` gives that **request URL** (what is fetched, stored,
logged, exported, checked against robots.txt and the scope) and the **dedup key** its
fingerprint is taken of: the request URL with its query arguments sorted by name (repeated
names keep their order), tracking parameters removed (``utm_*``, session ids; configurable,
``*`` is a suffix wildcard), ``;jsessionid=`` path parameters removed, escapes of unreserved
characters decoded and hex digits upper-cased. Two URLs for the same page get one key,
hence one ``fingerprint``. ``join`` resolves a link as a browser does, its query in the
page's encoding.

Userinfo (``http://user:password@host/``) and the fragment are dropped from both: a request
URL is stored, logged and exported, so it never carries a credential. A seed's credentials
become a per-origin secret of the fetcher (``fetchers.credentials``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import ipaddress
import re
from functools import cache, lru_cache
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from ada_url import join_url, normalize_url

from crawlfleet.errors import BadUrl
from crawlfleet.redact import redact

if TYPE_CHECKING:
    from tldextract import TLDExtract

FETCHABLE_SCHEMES = frozenset({"http", "https", "file"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# An http(s) URL with a lower-case host, maybe a port, a path of unreserved characters and
# slashes, and nothing after it (no query, fragment, userinfo or percent sign). The host's
# last label starts with a letter (a name: WHATWG reads a host ending in a number as IPv4)
# unless the host is a dotted-quad IPv4 address as WHATWG writes it.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_PLAIN_URL = re.compile(
    r"(https?)://"
    rf"(?:(?:[a-z0-9-]+(?:\.[a-z0-9-]+)*\.)?[a-z][a-z0-9-]*\.?|(?:{_OCTET}\.){{3}}{_OCTET})"
    r"(?::([1-9][0-9]{0,4}))?/[A-Za-z0-9._~/-]*"
)

_PLAIN_ORIGIN = re.compile(r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(?=[/?#]|\Z)")
# The start of an http(s) URL with a plain lower-case host: no userinfo, no IPv6 brackets, no
# character ``urlsplit`` would strip or refuse.

# What the URL parser strips from both ends of an input (C0 controls and space), and removes
# anywhere in it (ASCII tab and newline). Other white space (U+00A0, U+3000) is kept and
# percent-encoded, as browsers do.
C0_CONTROL_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
_ESCAPE = re.compile("%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_JSESSIONID = re.compile(";jsessionid=[^/;?]*", re.IGNORECASE)


@cache
def _suffixes() -> TLDExtract:
    """tldextract over its bundled public-suffix snapshot (no network), loaded on first use:
    importing it (and requests, which it loads for list updates never made here) took
    ~35 ms of every start, and a crawl within ``allowed_domains`` politeness-keyed by host
    never asks for a registrable domain (decision 0058)."""
    import tldextract

    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


URL_CACHE_SIZE = 16_384
"""Entries of each per-URL cache (``target``, ``host_of``): ~3 MB each when full.

Bounded small on purpose: a page's repeated links (navigation, pagination) stay cached, and a
cache sized to the whole site (100,000 entries took 18 and 15 MB) only made the first pages
of a crawl cheaper than the rest (see docs/decisions/0017)."""
HOST_CACHE_SIZE = 16_384
"""Entries of the per-host cache (``registrable_domain``)."""


def fingerprint(key: str) -> str:
    """A stable 128-bit hex id of a dedup key (the first half of its SHA-1)."""
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:32]


def request_fingerprint(key: str, method: str = "GET", body: str = "") -> str:
    """The fingerprint of a request: its method, URL dedup key and body.

    A GET without a body keeps the key's ``fingerprint``, so crawls stored before requests
    had methods resume with the same ids. Headers and context do not count: the first
    request of a (method, key, body) wins.
    """
    if method == "GET" and not body:
        return fingerprint(key)
    text = f"{method} {key}\n{body}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:32]


# The label separators tldextract splits a host on (its ``SCHEME_RE`` neighbours in
# ``tldextract.tldextract``): a host with none of them is one label.
_LABEL_DOTS = frozenset(".\u3002\uff0e\uff61")


@lru_cache(maxsize=HOST_CACHE_SIZE)
def registrable_domain(host: str) -> str:
    """``shop.example.co.uk`` -> ``example.co.uk``; IPs and bare names are returned as given.

    Uses tldextract's bundled public-suffix snapshot: no network. An IP address or a single
    label is answered without it (tldextract answers those with the host too, as
    ``tests/unit/test_urls.py`` checks), so a crawl seeded by addresses or bare hosts never
    loads the list (decision 0058).
    """
    if _LABEL_DOTS.isdisjoint(host) or _is_ip_address(host):
        return host
    parts = _suffixes()(host)
    return parts.top_domain_under_public_suffix or host


def _is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=HOST_CACHE_SIZE)
def is_public_suffix(name: str) -> bool:
    """Whether ``name`` is a public suffix (``com``, ``co.uk``), under which anyone registers:
    no cookie may be scoped to it. From tldextract's bundled snapshot."""
    parts = _suffixes()(name)
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
    """Whether ``url`` is both its own request URL and its own dedup key, told without parsing
    it (~1 µs; parsing and keying it takes ~4): a plain http(s) URL (``_PLAIN_URL``) with no
    dot segment (``/./``, ``/../``), no punycode label (``xn--``: the parser checks it) and no
    default or out-of-range port. Checked against the full path by
    ``tests/unit/test_urls_fast_path.py``."""
    match = _PLAIN_URL.fullmatch(url)
    if match is None or "/." in url or "xn--" in url:
        return False
    port = match.group(2)
    return port is None or (int(port) != _DEFAULT_PORTS[match.group(1)] and int(port) <= 65535)


def join(base: str, href: str, encoding: str = "utf-8") -> str | None:
    """``href`` resolved against the absolute URL ``base`` and serialized as a browser does
    (fragment and userinfo kept), or None when it is no URL.

    ``encoding`` is the Python codec of the page the href is on: the href's query is encoded
    in it (a UTF-16 page's in UTF-8), as the HTML standard asks; a character it cannot encode
    becomes ``%26%23<code point>%3B``. The path is always UTF-8.
    """
    href = _TAB_OR_NEWLINE.sub("", href.strip(C0_CONTROL_OR_SPACE))
    if not href.isascii() and not encoding.startswith("utf"):
        href = encode_query(href, encoding)
    try:
        return join_url(base, href)
    except ValueError:
        return None


def encode_query(href: str, encoding: str) -> str:
    """``href`` with the non-ASCII characters of its query percent-encoded in ``encoding``."""
    before_fragment, hash_mark, fragment = href.partition("#")
    path, question_mark, query = before_fragment.partition("?")
    if not question_mark or query.isascii():
        return href
    encoded = []
    for char in query:
        if char.isascii():
            encoded.append(char)
            continue
        try:
            data = char.encode(encoding)
        except UnicodeEncodeError:
            encoded.append(f"%26%23{ord(char)}%3B")
            continue
        encoded.append("".join(f"%{b:02X}" if b >= 0x80 else chr(b) for b in data))
    return f"{path}?{''.join(encoded)}{hash_mark}{fragment}"


def _normal_escape(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    return char if char in _UNRESERVED else f"%{match[1].upper()}"


def _normal_escapes(text: str) -> str:
    """``text`` with escapes of unreserved characters decoded and the others upper-cased."""
    return _ESCAPE.sub(_normal_escape, text) if "%" in text else text


class RequestUrl(NamedTuple):
    """A URL as it is requested, and the dedup key its fingerprint is taken of."""

    url: str
    key: str


class UrlRules:
    """Request URLs and dedup keys with the crawl's tracking-parameter list, and its
    politeness key."""

    def __init__(self, strip_params: tuple[str, ...] | list[str] = (), key: str = "host") -> None:
        patterns = [p.lower() for p in strip_params]
        self._exact = frozenset(p for p in patterns if "*" not in p and "?" not in p)
        self._globs = tuple(p for p in patterns if p not in self._exact)
        self._by_domain = key == "domain"
        self.target = lru_cache(maxsize=URL_CACHE_SIZE)(self._target)  # type: ignore[method-assign]

    def _drop(self, name: str) -> bool:
        lowered = name.lower()
        return lowered in self._exact or any(fnmatch.fnmatchcase(lowered, g) for g in self._globs)

    def target(self, url: str) -> RequestUrl:
        """The request URL and dedup key of an absolute URL (cached); raises ``BadUrl``."""
        return self._target(url)

    def _target(self, url: str) -> RequestUrl:
        url = url.strip(C0_CONTROL_OR_SPACE)
        if already_canonical(url):
            return RequestUrl(url, url)
        return self.full_target(url)

    def full_target(self, url: str) -> RequestUrl:
        """``target`` without its cache and fast path: every step."""
        try:
            href = normalize_url(url)
        except ValueError:
            raise BadUrl(redact(f"malformed URL {url!r}", url)) from None
        scheme, _, rest = href.partition("://")
        if scheme not in FETCHABLE_SCHEMES:
            raise BadUrl(redact(f"unsupported scheme in {url!r} (only http, https, file)", url))
        # A serialized special URL: "//", the authority, then a path starting with "/"; "#"
        # is escaped before the fragment and "?" before the query, "@" inside the userinfo.
        slash = rest.find("/")
        authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
        host = authority.rpartition("@")[2]
        request = f"{scheme}://{host}{path.partition('#')[0]}"
        return RequestUrl(request, self._key(scheme, host, path))

    def _key(self, scheme: str, host: str, path_query: str) -> str:
        path, _, query = path_query.partition("#")[0].partition("?")
        if ";" in path:
            path = _JSESSIONID.sub("", path)
        path = _normal_escapes(path)
        if not query:
            return f"{scheme}://{host}{path}"
        kept = []
        for pair in query.split("&"):
            if not pair:
                continue
            name = _normal_escapes(pair.partition("=")[0])
            if not self._drop(name):
                kept.append((name, _normal_escapes(pair)))
        kept.sort(key=lambda named: named[0])
        if not kept:
            return f"{scheme}://{host}{path}"
        return f"{scheme}://{host}{path}?{'&'.join(pair for _, pair in kept)}"

    def politeness_key(self, url: str) -> str:
        """The domain politeness is counted on: the host, or its registrable domain."""
        host = host_of(url)
        if not host:
            return "file"
        return registrable_domain(host) if self._by_domain else host
